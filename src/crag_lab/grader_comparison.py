"""Several graders side by side: as classifiers on labelled pairs, and by the verdicts
they give on the questions (same store, same thresholds, same retrieved chunks)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from crag.context import Context
from crag.graph import steps
from crag.state import InputState
from crag_lab.dataset import Pair, Question
from crag_lab.metrics import accuracy, best_accuracy, classify, roc_auc
from crag_lab.progress import Bar
from crag_lab.runner import score_pairs


async def verdicts(questions: Sequence[Question], ctx: Context, bar: Bar) -> list[str | None]:
    """The grade node's verdict for each question."""
    out: list[str | None] = []
    graded = steps("retrieve", "grade")
    for q in questions:
        state = await graded.ainvoke(InputState(question=q["question"]), context=ctx)
        out.append(state.get("verdict"))
        bar.advance(q["id"])
    return out


async def compare(
    names: Sequence[str],
    ctx: Context,
    questions: Sequence[Question],
    pairs: Sequence[Pair],
    *,
    quiet: bool = False,
) -> list[dict[str, Any]]:
    rows = []
    labels = [p["relevant"] for p in pairs]
    for name in names:
        gctx = ctx.with_overrides(grader=name)
        row: dict[str, Any] = {"grader": name}
        if pairs:
            bar = Bar(len(pairs), f"pairs {name:<9}", quiet=quiet)
            start = time.perf_counter()
            scores = await score_pairs(pairs, gctx, bar)
            seconds = time.perf_counter() - start
            bar.close()
            at_lower = classify(scores, labels, ctx.lower)
            row.update(
                auc=roc_auc(scores, labels),
                f1=at_lower["f1"],
                accuracy=at_lower["accuracy"],
                best_accuracy=best_accuracy(scores, labels)["accuracy"],
                pairs_per_second=len(pairs) / seconds if seconds else None,
            )
        if questions:
            bar = Bar(len(questions), f"verdicts {name:<6}", quiet=quiet)
            got = await verdicts(questions, gctx, bar)
            bar.close()
            row["verdict_accuracy"] = accuracy([q["expected_verdict"] for q in questions], got)
        rows.append(row)
    return rows
