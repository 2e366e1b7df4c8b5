"""The reliability tally: what each reliability test tried and whether crag came through
it, printed as counts at the end of the session.

A test's records travel with its report (`user_properties`), and the counts are made
from the reports: so they add up the same whether the suite runs in one process or in
several (`pytest -n`), where only the controlling process prints.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

#: How each measure is printed: (heading, what "ok" counts).
MEASURES = {
    "bad input": "handled with a one-line error",
    "bounded work": "finished in linear time",
    "fault": "survived",
    "kill": "left the store exact (no chunk lost or duplicated)",
    "attack": "not obeyed",
    "benign": "kept (not dropped as an order)",
    "outside write": "nothing written outside crag's folders",
    "secret": "showed no API key (output, logs, state, report)",
    "tenant run": "saw no chunk of another tenant (retrieved, graded, cached, cited, logged)",
}
#: The name of the records in a report's `user_properties`.
PROPERTY = "crag_reliability"

#: What the running test recorded and its report has not carried yet.
_PENDING: dict[str, list[Any]] = {"tally": [], "sums": []}
#: measure -> {kind: ok}, from the reports seen.
TALLY: dict[str, dict[str, bool]] = defaultdict(dict)
#: Quantities summed over the suite (chunks lost, chunks duplicated, files written ...).
SUMS: dict[str, int] = defaultdict(int)


class Tally:
    """What the reliability tests record (the `tally` fixture)."""

    def __call__(self, measure: str, kind: str, ok: bool) -> None:
        """One kind tried under a measure; a kind tried twice is ok only if both were."""
        assert measure in MEASURES, f"unknown reliability measure {measure!r}"
        _PENDING["tally"].append((measure, kind, bool(ok)))

    def add(self, quantity: str, n: int) -> None:
        """Add to a summed quantity, such as chunks lost after a forced kill."""
        _PENDING["sums"].append((quantity, int(n)))


def take_pending() -> dict[str, list[Any]] | None:
    """The records made since the last call, for a report to carry; None if none."""
    if not any(_PENDING.values()):
        return None
    taken = {key: list(values) for key, values in _PENDING.items()}
    for values in _PENDING.values():
        values.clear()
    return taken


def merge(records: dict[str, list[Any]]) -> None:
    for measure, kind, ok in records["tally"]:
        TALLY[measure][kind] = bool(ok) and TALLY[measure].get(kind, True)
    for quantity, n in records["sums"]:
        SUMS[quantity] += n


def summary() -> list[str]:
    """The counts, a line each, with the kinds that failed under their measure."""
    lines = []
    for measure, meaning in MEASURES.items():
        kinds = TALLY.get(measure)
        if not kinds:
            continue
        lines.append(f"{measure:>14}: {sum(kinds.values())}/{len(kinds)} {meaning}")
        lines += [f"{'':>16}failed: {kind}" for kind, good in sorted(kinds.items()) if not good]
    lines += [f"{quantity:>14}: {n}" for quantity, n in sorted(SUMS.items())]
    return lines
