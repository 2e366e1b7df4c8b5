"""Several graders side by side: as classifiers on labelled pairs, and by the verdicts
they give on the questions (same store, same thresholds, same retrieved chunks)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, cast

from crag.context import Context
from crag.nodes.grade import fast_gap
from crag.state import InputState, State
from crag_lab.dataset import Pair, Question
from crag_lab.metrics import accuracy, best_accuracy, classify, roc_auc
from crag_lab.partial import steps
from crag_lab.progress import Bar
from crag_lab.protocol import (
    auc_by_source,
    fold_thresholds,
    loso_thresholds,
    question_source,
    searched_in_library,
)
from crag_lab.runner import score_pairs


async def grade_all(questions: Sequence[Question], ctx: Context, bar: Bar) -> list[State]:
    """Each question retrieved and graded by the grade node (scores, verdict, gaps)."""
    out: list[State] = []
    graded = steps("split", "retrieve", "grade")
    for q in questions:
        state = await graded.ainvoke(InputState(question=q["question"]), context=ctx)
        out.append(cast(State, state))
        bar.advance(q["id"])
    return out


async def compare(
    names: Sequence[str],
    ctx: Context,
    questions: Sequence[Question],
    pairs: Sequence[Pair],
    pair_sources: Sequence[str],
    *,
    quiet: bool = False,
) -> list[dict[str, Any]]:
    """Per grader: pair AUC (overall and by source), classification at `lower`, pairs/s;
    verdict accuracy at the run's thresholds (overall and by source), and with the
    thresholds refitted leaving each source out (see `crag_lab.protocol`)."""
    rows = []
    labels = [p["relevant"] for p in pairs]
    in_library = [searched_in_library(s) for s in pair_sources]
    sources = [question_source(q) for q in questions]
    expected = [q["expected_verdict"] for q in questions]
    for name in names:
        gctx = ctx.with_overrides(grader=name)
        row: dict[str, Any] = {"grader": name}
        if pairs:
            bar = Bar(len(pairs), f"pairs {name:<9}", quiet=quiet)
            start = time.perf_counter()
            scores = await score_pairs(pairs, gctx, bar, in_library)
            seconds = time.perf_counter() - start
            bar.close()
            at_lower = classify(scores, labels, ctx.grading.lower)
            row.update(
                auc=roc_auc(scores, labels),
                auc_by_source=auc_by_source(scores, labels, pair_sources),
                f1=at_lower["f1"],
                accuracy=at_lower["accuracy"],
                best_accuracy=best_accuracy(scores, labels)["accuracy"],
                pairs_per_second=len(pairs) / seconds if seconds else None,
            )
        if questions:
            bar = Bar(len(questions), f"verdicts {name:<6}", quiet=quiet)
            states = await grade_all(questions, gctx, bar)
            bar.close()
            got = [st.get("verdict") for st in states]
            row["verdict_accuracy"] = accuracy(expected, got)
            row["verdict_accuracy_by_source"] = {
                source: accuracy(
                    [e for e, s in zip(expected, sources, strict=True) if s == source],
                    [v for v, s in zip(got, sources, strict=True) if s == source],
                )
                for source in sorted(set(sources))
            }
            grades = [st["grades"] for st in states]
            gap = fast_gap(ctx)
            row["verdict_accuracy_question_folds"] = fold_thresholds(grades, expected, gap)
            row["verdicts_leaving_each_source_out"] = loso_thresholds(
                grades, expected, sources, gap
            )
        rows.append(row)
    return rows
