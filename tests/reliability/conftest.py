"""The reliability suite: every test here records what it tried in a shared tally
(`tests/support/tally.py`), and the session ends by printing the counts (`make test`
shows them).

A tally line is a kind of thing tried (a bad input, a fault, an attack, a benign
sentence) and whether crag came through it as documented. The test still asserts
the behaviour; the tally only makes the totals visible in one table.
"""

from __future__ import annotations

import pytest
from tally import Tally


@pytest.fixture
def tally() -> Tally:
    return Tally()
