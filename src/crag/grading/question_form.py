"""What a question asks for, read from its words: the one place that classifies a
question's form, and `read`, which gives a question's whole reading as one value.

- `question_type`: the kind of span that answers it (a year, a date, a number, a
  person, a place, an entity), for the feature grader;
- `slot`: the one value it asks for (`number`, `year`, `date`, `version`, `name`), the
  value sources may disagree on;
- `time_sensitive` / `time_constraint`: whether the answer depends on when it is asked
  ("the latest version", "the current price", "as of 2025"): the newer source is more
  likely right, and the question takes the full corrective path;
- `structured`: a value a table would hold (a price, a count, a spec), for the SQL
  source and the router.

A comparison's sides and a question's parts are read by `crag.grading.decompose`.

`read(text)` is the question as the run reads it (`Question`): its parts, key terms,
the years, dates, versions and names it constrains, and the above. Each is read on
first use and kept, and the same text gives the same `Question`, so grade, refine,
the web path, verify and the answer cache share one reading.
"""

from __future__ import annotations

import functools
import re
from functools import cached_property

from crag.grading.constraints import Constraint, constraints, subjects, when
from crag.grading.coverage import key_terms
from crag.grading.decompose import comparison, rule_parts
from crag.text import STOPWORDS, normalize

# question type -> the kinds of span that can answer it
_QTYPES: list[tuple[str, re.Pattern[str]]] = [
    ("year", re.compile(r"\b(what|which|in what) year\b")),
    (
        "num",
        re.compile(
            r"\bhow (many|much)\b|\b(revenue|price|cost|salary|population|net worth|budget)\b"
        ),
    ),
    # "when should/would/to ..." asks for the conditions of a choice, not for a date
    (
        "date",
        re.compile(
            r"\bwhen (was|is|does|did|will|do|are|were)\b"
            r"|^when\b(?! (should|would|could|can|might|must|to)\b)|\bdate\b"
        ),
    ),
    ("place", re.compile(r"\bwhere\b")),
    (
        "person",
        re.compile(
            r"\bwho(m|se)?\b|^(which|what) (\w+ ){0,2}"
            r"(actor|actress|player|director|singer|person|ceo|president|winner)\b"
        ),
    ),
    (
        "entity",
        re.compile(
            r"^(which|what) (\w+ ){0,3}(country|team|company|movie|film|song|album|club|city"
            r"|brand|car|show|book|game|network|airline|university|device|phone|app)\b"
            r"|^(which|what)\b.*\b(won|wins?|winner|champion|acquired?|bought|starring|hosted?)\b"
        ),
    ),
]

# The question's own interrogative: the first one. "How do we know how many trees we
# need?" asks for a method; its "how many" belongs to the clause it asks about.
_WH = re.compile(r"\b(what|which|who|whom|whose|when|where|how|why)\b")


def question_type(question: str) -> str:
    low = question.lower().strip()
    first = _WH.search(low)
    if (
        first
        and first.group(1) in ("how", "why")
        and not re.match(r"how (many|much)\b", low[first.start() :])
    ):
        return "other"
    for name, pattern in _QTYPES:
        if pattern.search(low):
            return name
    return "other"


# A question after one value: "what is", "which port", "when", "who", "how many" ...
_ONE_VALUE = re.compile(
    r"^(?:what|which|when|who|whom|whose|where|in what|on what|at what|to what"
    r"|how (?:many|much|long|big|large|old|often|fast|far|high|heavy|tall|wide|deep))\b"
)
# ... unless it asks for several: "and what", a change, a history, a comparison.
_MANY_VALUES = re.compile(
    r"\b(?:and|or|then)\s+(?:what|which|when|who|whom|whose|where|how|why)\b"
    r"|\b(?:chang\w*|differ\w*|histor\w*|evolv\w*|compar\w*|between|versus|vs)\b"
)
# What a question asks to measure when it does not say "how many": "what is the default
# port", "the maximum upload size", "the fee". A definition ("what is dropout?") is no value.
_MEASURE = re.compile(
    r"\b(?:port|limit|size|price|cost|fee|rate|timeout|interval|duration|length|capacity"
    r"|maximum|minimum|max|min|threshold|quota|number|count|percentage|percent"
    r"|level|speed|memory|storage|bandwidth|latency|retention|period|window|deadline|age|score)s?\b"
)
_KIND_OF_TYPE = {
    "year": "year",
    "date": "date",
    "num": "number",
    "person": "name",
    "place": "name",
    "entity": "name",
}


def _asks_a_measure(low: str) -> bool:
    """Whether a measure is what the question names: the measure word heads its phrase
    ("the default port of", "the rate limit?"), not another noun ("a rate limiter", the
    "window function", the "learning rate schedule")."""
    for found in _MEASURE.finditer(low):
        after = re.match(r"[\s\-]*([a-z]+)", low[found.end() :])
        if after is None or after[1] in STOPWORDS or _MEASURE.fullmatch(after[1]):
            return True
    return False


def slot(question: str) -> str | None:
    """The kind of the one value a question asks for (`number`, `year`, `date`,
    `version`, `name`), or None when it asks for something else or for several."""
    low = " ".join(normalize(question).lower().split())
    if not _ONE_VALUE.match(low) or _MANY_VALUES.search(low) or rule_parts(question):
        return None
    if kind := _KIND_OF_TYPE.get(question_type(low)):
        return kind
    if re.search(r"\b(?:version|release)\b", low) and not low.startswith("how "):
        return "version"
    if _asks_a_measure(low):
        return "number"
    return "name" if low.startswith("which ") else None


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


def time_constraint(question: str) -> str | None:
    """Why the question's answer depends on when it is asked, or None: it asks for the
    present or names a year (`time_sensitive`), a date or a version."""
    if why := time_sensitive(question):
        return why
    named = [c.value for c in when(question)]  # a year would be time-sensitive above
    return f"names {', '.join(named)}" if named else None


# Questions that ask for a value a table would hold: a price, a count, a spec.
_STRUCTURED = re.compile(
    r"\b(?:how (?:many|much)|price[sd]?|pricing|costs?|fees?|counts?|number of|total|"
    r"average|median|maximum|minimum|max|min|limits?|quotas?|specs?|specifications?|"
    r"rates?|sizes?|capacity|per (?:month|year|user|seat|hour|day))\b",
    re.IGNORECASE,
)


def structured(question: str) -> bool:
    """Whether the question asks for a price, count, spec or other tabular value."""
    return _STRUCTURED.search(question) is not None


class Question:
    """A question as the run reads it; each part of the reading is made on first use."""

    def __init__(self, text: str) -> None:
        self.text = text

    @cached_property
    def parts(self) -> tuple[str, ...]:
        """The parts its form shows ("X vs Y", "A and B each"); () for one question."""
        return tuple(rule_parts(self.text))

    @cached_property
    def compares(self) -> bool:
        return comparison(normalize(self.text)) is not None

    @cached_property
    def key_terms(self) -> tuple[str, ...]:
        return tuple(key_terms(self.text))

    @cached_property
    def constraints(self) -> tuple[Constraint, ...]:
        """The years, dates, quarters, versions and names it asks about."""
        return tuple(constraints(self.text))

    @cached_property
    def when(self) -> tuple[Constraint, ...]:
        """Its years, dates and versions (the constraints but names)."""
        return tuple(when(self.text))

    @cached_property
    def subjects(self) -> tuple[Constraint, ...]:
        """The things of a kind it picks ("the Team plan")."""
        return tuple(subjects(self.text))

    @cached_property
    def slot(self) -> str | None:
        return slot(self.text)

    @cached_property
    def time_sensitive(self) -> str | None:
        return time_sensitive(self.text)

    @cached_property
    def time_constraint(self) -> str | None:
        return time_constraint(self.text)

    @cached_property
    def structured(self) -> bool:
        return structured(self.text)


@functools.lru_cache(maxsize=1024)
def read(text: str) -> Question:
    """The reading of a question's text, made once per process."""
    return Question(text)
