"""Search queries written from a question: its constraints kept, and the library's
own names for its terms (the reformulations of the correction cascade)."""

from __future__ import annotations

from collections.abc import Sequence

from crag.context import Context
from crag.grading.constraints import check, constraints, when
from crag.grading.coverage import expansions


def with_constraints(query: str, question: str, *, names: bool = True) -> str:
    """The query, plus any year, date, version (and, with `names`, specific name) of the
    question it dropped: a search that loses "2023" finds every year's results."""
    asked = constraints(question) if names else when(question)
    missing = [c.value for c in check(asked, [query]).unmet]
    return " ".join([query, *missing]).strip()


def reformulations(
    ctx: Context, question: str, query: str, targets: Sequence[str], tried: Sequence[str]
) -> list[str]:
    """Queries for searching the library again, cheapest change first: the rewritten
    query, then each target (the question or its open parts) with the library's long
    forms of its abbreviations (and the reverse) and its constraints added. Queries
    already run are left out, so a retry never repeats a search."""
    candidates = [with_constraints(query, question, names=False)]
    for target in targets:
        expanded = " ".join([target, *expansions(ctx, ctx.collection, target)])
        candidates.append(with_constraints(expanded, target))
    done = {" ".join(q.lower().split()) for q in tried}
    fresh = []
    for candidate in candidates:
        key = " ".join(candidate.lower().split())
        if key and key not in done:
            done.add(key)
            fresh.append(candidate)
    return fresh
