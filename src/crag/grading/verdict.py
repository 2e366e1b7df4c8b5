"""CRAG's verdict rule and the router, in one place: the grade node and the lab's sweeps
both use them.

The grade node records what the grader found as `Grades` (no threshold applied yet)
and `decide` turns them into the verdict at given thresholds, so `crag tune` and
`crag eval` replay exactly the decision the node made, at any other thresholds.

The router decides which questions may take the fast path: a simple question whose
best document clearly wins (a score at or above `upper` and a clear gap to the next)
is answered from that document alone, with no LLM judge, no decomposition and no strip
work on the others. A complex one (several parts, a comparison, a time constraint, a
structured value) always takes the full corrective path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from crag.grading.question_form import read
from crag.state import Grades, Verdict


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


@dataclass(frozen=True)
class Decision:
    """A verdict and what it rests on."""

    verdict: Verdict
    fast: bool  # the fast path: the best document of a simple question clearly wins
    good: list[int]  # the good documents, as indices of the graded ones
    covered: list[bool]  # per part of a decomposed question
    other: list[str]  # years, dates and versions asked that no good document meets
    missing: list[str]  # what the library cannot cover: names it never writes, then `other`


def fast_winner(grades: Grades, upper: float, fast_gap: float | None) -> int | None:
    """The document that alone answers a simple question (the seeds' score-plus-gap
    check on the first retrieval), or None; `fast_gap` None: no fast path."""
    first = grades["first"]
    if fast_gap is None or not grades["simple"] or not clear_winner(first, upper, fast_gap):
        return None
    return max(range(len(first)), key=first.__getitem__)


def decide(grades: Grades, upper: float, lower: float, fast_gap: float | None) -> Decision:
    """The verdict at these thresholds: the fast path's, a decomposed question's by its
    parts, or CRAG's rule on the scores, capped by what the library cannot cover."""
    winner = fast_winner(grades, upper, fast_gap)
    if winner is not None:
        return Decision("correct", True, [winner], [], [], [])
    scores = grades["scores"]
    good = [i for i, s in enumerate(scores) if s >= lower]
    # the right topic at another year, date or version (the 2.4 guide for a question on
    # version 3) answers only part of the question: the web must fill in the rest
    met = {m for i in good for m in grades["meets"][i]}
    never = grades["never"]
    other = [a for a in grades["asked"] if good and a not in met and a not in never]
    missing = [*never, *other]
    covered = [p["explains"] >= upper for p in grades["parts"]]
    if covered:
        verdict = verdict_of_parts(covered, [p["top"] for p in grades["parts"]], lower, missing)
    else:
        verdict = decide_verdict(scores, upper, lower, missing, grades["unknown"])
    return Decision(verdict, False, good, covered, other, missing)


def complexity(question: str, parts: Sequence[str]) -> list[str]:
    """Why the question needs the full path ([] for a simple question)."""
    reasons = []
    reading = read(question)
    if len(parts) >= 2:
        reasons.append(f"{len(parts)} parts")
    if timing := reading.time_constraint:
        reasons.append(f"time-sensitive ({timing})")
    if reading.structured:
        reasons.append("asks for a structured value")
    return reasons


def clear_winner(scores: Sequence[float], upper: float, gap: float) -> bool:
    """The seeds' score-plus-gap check: the best document at or above `upper`, and at
    least `gap` ahead of the next."""
    ranked = sorted(scores, reverse=True)
    if not ranked or ranked[0] < upper:
        return False
    return len(ranked) == 1 or ranked[0] - ranked[1] >= gap
