"""grade: score every retrieved chunk and decide the CRAG verdict."""

from __future__ import annotations

from collections.abc import Sequence

from crag.context import Context
from crag.providers.graders import make_grader
from crag.state import Passage, State, Verdict
from crag.trail import NodeResult, recorded


def decide_verdict(scores: Sequence[float], upper: float, lower: float) -> Verdict:
    """CRAG's rule: correct if any >= upper; incorrect if all < lower; else ambiguous."""
    if any(s >= upper for s in scores):
        return "correct"
    if all(s < lower for s in scores):  # also: nothing retrieved
        return "incorrect"
    return "ambiguous"


@recorded("grade")
async def grade(state: State, ctx: Context) -> NodeResult:
    docs = state.get("docs") or []
    grader = make_grader(ctx)
    scores = await grader.ascore(state["question"], [d["text"] for d in docs])
    scored = [Passage(**d, score=round(s, 4)) for d, s in zip(docs, scores, strict=True)]
    verdict = decide_verdict(scores, ctx.upper, ctx.lower)
    good = [d for d in scored if d["score"] >= ctx.lower]
    detail = f"{verdict} by {grader.name}: " + ", ".join(f"{s:.2f}" for s in scores)
    update = {
        "docs": scored,
        "scores": [round(s, 4) for s in scores],
        "grader": grader.name,
        "verdict": verdict,
        "good_docs": good,
    }
    return update, detail
