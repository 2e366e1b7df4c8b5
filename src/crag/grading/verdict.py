"""CRAG's verdict rule, in one place: the grade node and the lab's sweeps both use it."""

from __future__ import annotations

from collections.abc import Sequence

from crag.state import Verdict


def decide_verdict(
    scores: Sequence[float],
    upper: float,
    lower: float,
    missing: Sequence[str] = (),
    unknown: Sequence[str] = (),
) -> Verdict:
    """CRAG's rule: correct if any >= upper; incorrect if all < lower; else ambiguous.

    A library that lacks some of the question's terms (`missing`) can answer only
    part of it, so such a question is at best ambiguous: the web fills the gap. One
    that never names the thing a one-part question asks about (`unknown`) can answer
    none of it, however close a chunk's topic: incorrect.
    """
    if unknown:
        return "incorrect"
    if any(s >= upper for s in scores):
        return "ambiguous" if missing else "correct"
    if all(s < lower for s in scores):  # also: nothing retrieved
        return "incorrect"
    return "ambiguous"


def verdict_of_parts(
    covered: Sequence[bool], part_scores: Sequence[float], lower: float, missing: Sequence[str] = ()
) -> Verdict:
    """A decomposed question's verdict: every part covered, correct; no part with a
    relevant document (each part's best score < lower), incorrect; else ambiguous."""
    if covered and all(covered):
        return "ambiguous" if missing else "correct"
    if all(s < lower for s in part_scores):
        return "incorrect"
    return "ambiguous"
