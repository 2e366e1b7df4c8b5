"""grade: score every retrieved chunk and decide the CRAG verdict."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from crag.context import Context
from crag.grading.coverage import coverage_gaps
from crag.grading.registry import make_grader
from crag.grading.verdict import decide_verdict
from crag.nodes.trail import context_of, note, recorded
from crag.state import Passage, State


@recorded
async def grade(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    docs = state.get("docs") or []
    grader = make_grader(ctx)
    scores, (never, passing) = await asyncio.gather(
        grader.ascore(state["question"], [d["text"] for d in docs]),
        coverage_gaps(state["question"], ctx),
    )
    missing = never + passing
    scored = [Passage(**d, score=round(s, 4)) for d, s in zip(docs, scores, strict=True)]
    verdict = decide_verdict(scores, ctx.upper, ctx.lower, missing)
    detail = f"{verdict} by {grader.name}: " + ", ".join(f"{s:.2f}" for s in scores)
    if never:
        detail += f"; the library never mentions {', '.join(never)}"
    if passing:
        detail += f"; the library only names {', '.join(passing)} in passing"
    return {
        "docs": scored,
        "scores": [round(s, 4) for s in scores],
        "grader": grader.name,
        "verdict": verdict,
        "good_docs": [d for d in scored if d["score"] >= ctx.lower],
        "missing_terms": missing,
        **note(detail),
    }
