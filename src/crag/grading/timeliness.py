"""Whether a question asks about the present: the one place that decides it.

"What is the latest version?", "the current price", "as of 2025": the answer changes
with time, so among sources that disagree the newer one is more likely right. Such a
question raises the recency weight of the composite confidence, leads with the web on
the ambiguous path (`source_priority=auto`), and any router may ask the same.
"""

from __future__ import annotations

import re

from crag.grading.constraints import constraints
from crag.text import normalize

# Words that ask for the state of things now, not at some time in the past.
_NOW = re.compile(
    r"\b(latest|newest|current(?:ly)?|most recent|recent(?:ly)?|nowadays|today|right now"
    r"|as of|up[- ]to[- ]date|this (?:year|month|week)|still|anymore|any more)\b"
)


def time_sensitive(question: str) -> str | None:
    """Why the question's answer depends on when it is asked (the words that say so),
    or None when it does not."""
    low = normalize(question).lower()
    if m := _NOW.search(low):
        return f"asks for {m.group(1)!r}"
    years = [c.value for c in constraints(question) if c.kind == "year"]
    return f"names the year {years[0]}" if years else None
