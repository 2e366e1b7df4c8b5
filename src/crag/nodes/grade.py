"""grade: score every retrieved chunk and decide the CRAG verdict."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from crag.context import Context
from crag.providers.graders import make_grader
from crag.state import Passage, State, Verdict
from crag.text import comparison_sides, is_specific, key_terms
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


async def coverage_gaps(question: str, ctx: Context) -> tuple[list[str], list[str]]:
    """What the library cannot cover: specific terms of the question it never mentions,
    and sides of a comparison it names only in passing (never twice in one chunk).

    The second case is the classic partial question: books that explain batch
    normalization and mention layer normalization once, here and there, can answer
    only half of "batch normalization vs layer normalization".
    """
    if not ctx.coverage_check:
        return [], []
    from crag.store import missing_terms, most_mentions

    terms = [t for t in key_terms(question) if is_specific(t)]
    sides = comparison_sides(question)
    if not terms and not sides:  # most questions: nothing to look up
        return [], []
    missing, mentions = await asyncio.gather(
        asyncio.to_thread(missing_terms, ctx, ctx.collection, terms),
        asyncio.to_thread(most_mentions, ctx, ctx.collection, sides),
    )
    return missing, [side for side, most in mentions.items() if most == 1]


@recorded("grade")
async def grade(state: State, ctx: Context) -> NodeResult:
    docs = state.get("docs") or []
    grader = make_grader(ctx)
    scores, (never, passing) = await asyncio.gather(
        grader.ascore(state["question"], [d["text"] for d in docs]),
        coverage_gaps(state["question"], ctx),
    )
    missing = never + passing
    scored = [Passage(**d, score=round(s, 4)) for d, s in zip(docs, scores, strict=True)]
    verdict = decide_verdict(scores, ctx.upper, ctx.lower, missing)
    good = [d for d in scored if d["score"] >= ctx.lower]
    detail = f"{verdict} by {grader.name}: " + ", ".join(f"{s:.2f}" for s in scores)
    if never:
        detail += f"; the library never mentions {', '.join(never)}"
    if passing:
        detail += f"; the library only names {', '.join(passing)} in passing"
    update = {
        "docs": scored,
        "scores": [round(s, 4) for s in scores],
        "grader": grader.name,
        "verdict": verdict,
        "good_docs": good,
        "missing_terms": missing,
    }
    return update, detail
