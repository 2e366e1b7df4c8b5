"""grade: score every retrieved chunk and decide the CRAG verdict."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from crag.context import Context
from crag.errors import ProviderError
from crag.grading.constraints import check, constraints
from crag.grading.coverage import coverage_gaps
from crag.grading.registry import LLM_GRADERS, make_grader
from crag.grading.verdict import decide_verdict
from crag.nodes.trail import context_of, note, recorded
from crag.state import Passage, State


async def scored_by(ctx: Context, question: str, texts: list[str]) -> tuple[list[float], str]:
    """The grader's scores and its name. An LLM judge that gives no usable answer at
    all (its server is down) is replaced by the built-in grader, and the name says so:
    a neutral score for every document would decline what the library answers."""
    grader = make_grader(ctx)
    try:
        return await grader.ascore(question, texts), grader.name
    except ProviderError as exc:
        if ctx.grader not in LLM_GRADERS:
            raise
        stand_in = make_grader(ctx.with_overrides(grader="auto"))
        scores = await stand_in.ascore(question, texts)
        return scores, f"{stand_in.name} ({exc})"


@recorded
async def grade(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    docs = state.get("docs") or []
    (scores, name), (never, passing) = await asyncio.gather(
        scored_by(ctx, state["question"], [d["text"] for d in docs]),
        coverage_gaps(state["question"], ctx),
    )
    scored = [Passage(**d, score=round(s, 4)) for d, s in zip(docs, scores, strict=True)]
    good = [d for d in scored if d["score"] >= ctx.lower]
    # The right topic at another year, date or version (the 2.4 guide for a question on
    # version 3) answers only part of the question: the web must fill in the rest.
    asked = [c for c in constraints(state["question"]) if c.kind != "name"]
    other = []
    if ctx.coverage_check and asked and good:
        unmet = check(asked, [d["text"] for d in good]).unmet
        other = [f"{c.kind} {c.value}" if c.kind == "version" else c.value for c in unmet]
        other = [o for o in other if o not in never]
    missing = never + passing + other
    verdict = decide_verdict(scores, ctx.upper, ctx.lower, missing)
    detail = f"{verdict} by {name}: " + ", ".join(f"{s:.2f}" for s in scores)
    if never:
        detail += f"; the library never mentions {', '.join(never)}"
    if passing:
        detail += f"; the library only names {', '.join(passing)} in passing"
    if other:
        detail += f"; no relevant chunk speaks of {', '.join(other)}"
    return {
        "docs": scored,
        "scores": [round(s, 4) for s in scores],
        "grader": name,
        "verdict": verdict,
        "good_docs": good,
        "missing_terms": missing,
        **note(detail),
    }
