"""grade: score every retrieved chunk and decide the CRAG verdict."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from crag.context import Context
from crag.providers.graders import make_grader
from crag.state import Passage, State, Verdict
from crag.text import is_specific, key_terms
from crag.trail import NodeResult, recorded


def decide_verdict(
    scores: Sequence[float], upper: float, lower: float, missing: Sequence[str] = ()
) -> Verdict:
    """CRAG's rule: correct if any >= upper; incorrect if all < lower; else ambiguous.

    A library that lacks some of the question's terms (`missing`) can answer only
    part of it, so such a question is at best ambiguous: the web fills the gap.
    """
    if any(s >= upper for s in scores):
        return "ambiguous" if missing else "correct"
    if all(s < lower for s in scores):  # also: nothing retrieved
        return "incorrect"
    return "ambiguous"


async def unknown_terms(question: str, ctx: Context) -> list[str]:
    """Specific terms of the question that appear nowhere in the library."""
    terms = [t for t in key_terms(question) if is_specific(t)]
    if not ctx.coverage_check or not terms:
        return []
    from crag.store import missing_terms

    return await asyncio.to_thread(missing_terms, ctx, ctx.collection, terms)


@recorded("grade")
async def grade(state: State, ctx: Context) -> NodeResult:
    docs = state.get("docs") or []
    grader = make_grader(ctx)
    scores, missing = await asyncio.gather(
        grader.ascore(state["question"], [d["text"] for d in docs]),
        unknown_terms(state["question"], ctx),
    )
    scored = [Passage(**d, score=round(s, 4)) for d, s in zip(docs, scores, strict=True)]
    verdict = decide_verdict(scores, ctx.upper, ctx.lower, missing)
    good = [d for d in scored if d["score"] >= ctx.lower]
    detail = f"{verdict} by {grader.name}: " + ", ".join(f"{s:.2f}" for s in scores)
    if missing:
        detail += f"; the library never mentions {', '.join(missing)}"
    update = {
        "docs": scored,
        "scores": [round(s, 4) for s in scores],
        "grader": grader.name,
        "verdict": verdict,
        "good_docs": good,
        "missing_terms": missing,
    }
    return update, detail
