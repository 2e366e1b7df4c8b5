"""The router: which questions may take the fast path, and which need the full one.

A simple question whose best document clearly wins (a score at or above `upper` and
a clear gap to the next, the score-plus-gap check) is answered from that document
alone: no LLM judge, no decomposition, no strip work on the others. A complex one
(several parts, a comparison, a time constraint, a structured value) always takes
the full corrective path, where each part and each constraint is checked.
"""

from __future__ import annotations

from collections.abc import Sequence

from crag.grading.question_form import read


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
