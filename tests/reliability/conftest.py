"""The reliability suite: every test here records what it tried in a shared tally,
and the session ends by printing the counts (`make test` shows them).

A tally line is a kind of thing tried (a bad input, a fault, an attack, a benign
sentence) and whether crag came through it as documented. The test still asserts
the behaviour; the tally only makes the totals visible in one table.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

#: measure -> {kind: ok}
_TALLY: dict[str, dict[str, bool]] = defaultdict(dict)
#: Quantities summed over the suite (chunks lost, chunks duplicated, files written ...).
_SUMS: dict[str, int] = defaultdict(int)

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


class Tally:
    """What the reliability tests record; printed once at the end of the session."""

    def __call__(self, measure: str, kind: str, ok: bool) -> None:
        """One kind tried under a measure; a kind tried twice is ok only if both were."""
        assert measure in MEASURES, f"unknown reliability measure {measure!r}"
        _TALLY[measure][kind] = bool(ok) and _TALLY[measure].get(kind, True)

    def add(self, quantity: str, n: int) -> None:
        """Add to a summed quantity, such as chunks lost after a forced kill."""
        _SUMS[quantity] += n


@pytest.fixture
def tally() -> Tally:
    return Tally()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _TALLY:
        return
    write = terminalreporter.write_line
    terminalreporter.section("reliability counts")
    for measure, meaning in MEASURES.items():
        kinds = _TALLY.get(measure)
        if not kinds:
            continue
        ok = sum(kinds.values())
        write(f"{measure:>14}: {ok}/{len(kinds)} {meaning}")
        for kind, good in sorted(kinds.items()):
            if not good:
                write(f"{'':>16}failed: {kind}")
    for quantity, n in sorted(_SUMS.items()):
        write(f"{quantity:>14}: {n}")
