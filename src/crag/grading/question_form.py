"""What a question asks for, read from its words: the one place that classifies a
question's form.

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
"""

from __future__ import annotations

import re

from crag.grading.constraints import constraints, when
from crag.grading.decompose import rule_parts
from crag.text import normalize

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
    if _MEASURE.search(low):
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
