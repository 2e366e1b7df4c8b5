"""A question's constraints, and whether the evidence for an answer meets them.

Relevance is "about the same thing"; answerability is also "under the question's
constraints". A passage on the 2022 prize does not answer a question about the 2023
prize, nor does the guide to version 1.2 answer a question about version 1.5, nor a
chapter on GPT-3 a question about GPT-5. So the years, dates, version numbers and
specific names a question asks about must appear in the evidence an answer rests on;
what the evidence says instead (another year, another version) is reported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from crag.dates import DATE_PATTERNS, YEAR, dates_in
from crag.grading.coverage import is_specific, key_terms
from crag.text import MONTHS, STOPWORDS, folded_words, normalize, split_sentences

# "1.5", "3.11.2", "v2", "version 3": numbers that name one release among others (a
# sentence's full stop may follow: "... with Lumen Server 2.4.")
_VERSION = re.compile(
    r"(?<![\w.])(?:v(?=\d)|version\s+)?(\d+(?:\.\d+)+|(?<=v)\d+|(?<=version )\d+)"
    r"(?![\w]|\.\w)",
    re.I,
)
_MONTH_DAY = re.compile(r"\b([a-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?\b")
# "Q3", "third quarter", "the first half of 2024", "H2": a period within a year
_ORDINAL = {"first": "1", "second": "2", "third": "3", "fourth": "4", "1st": "1", "2nd": "2"}
_ORDINAL |= {"3rd": "3", "4th": "4"}
_QUARTER = re.compile(
    r"\b(?:q([1-4])|(first|second|third|fourth|1st|2nd|3rd|4th)[\s-]+quarter)\b", re.I
)
_HALF = re.compile(r"\b(?:h([12])|(first|second|1st|2nd)\s+half)\b", re.I)
# "0.1 + 0.2": numbers in arithmetic are quantities, not releases
_SUM = re.compile(r"\d\s*[+*/=×÷]\s*\d|\d\s+[-−]\s+\d")  # not "2022-06-09", "1-2"


@dataclass(frozen=True)
class Constraint:
    kind: str  # year | version | date | quarter | half | name | subject
    value: str  # in normal form, lower case ("q3", "h1")
    # a subject's: the acronyms the question names, none of them another thing of its
    # kind ("HTTPS port" for "the TCP port of the HTTPS API")
    besides: tuple[str, ...] = ()


@dataclass
class Check:
    """What the evidence shows of the question's constraints."""

    met: list[Constraint] = field(default_factory=list)
    unmet: list[Constraint] = field(default_factory=list)
    # per unmet year or version: the other years or versions the evidence names
    instead: dict[str, list[str]] = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        return not self.unmet


def versions(text: str) -> list[str]:
    """The version numbers a text writes, lower case. A text that does arithmetic on
    numbers ("0.1 + 0.2 is not 0.3") writes quantities, not releases."""
    if _SUM.search(text):
        return []
    return [v.lower() for v in _VERSION.findall(text)]


def periods(text: str) -> list[Constraint]:
    """The quarters and halves of a year a text names ("Q3", "the first half")."""
    found = [
        Constraint("quarter", f"q{a or _ORDINAL[b.lower()]}") for a, b in _QUARTER.findall(text)
    ]
    found += [Constraint("half", f"h{a or _ORDINAL[b.lower()]}") for a, b in _HALF.findall(text)]
    return found


def _initial_words(text: str) -> set[str]:
    """The words that open a sentence: their capital says where they stand, not a name."""
    return {m.group(1) for m in re.finditer(r"(?:^|[.!?]\s+)[\"'(]*([A-Za-z][\w'’-]*)", text)}


def constraints(question: str) -> list[Constraint]:
    """The years, dates, quarters, versions and specific names a question asks about."""
    text = normalize(question)
    low = text.lower()
    found: list[Constraint] = [Constraint("year", y) for y in YEAR.findall(text)]
    found += [Constraint("version", v) for v in versions(text)]
    found += [
        Constraint("date", f"{m[:3]} {int(d)}")
        for m, d in _MONTH_DAY.findall(low)
        if m in MONTHS and m != "may"  # "may 5" is more often a verb than a date
    ]
    found += periods(text)
    numbers = {c.value for c in found}
    initial = _initial_words(text)
    for term in key_terms(text):
        if re.search(r"['’]", term):  # "I'm", "don't": a contraction, not a name
            continue
        # a name as written: capitals, digits or a hyphen (AdaBoost, LVIII, GPT-5,
        # scikit-learn); a rare lower-case word ("regularization") is vocabulary, and the
        # capital of a word that opens the question is its position's ("Whats ...")
        shape = term[1:] if term in initial else term
        written_as_name = re.search(r"[A-Z\d-]", shape) is not None
        letters = sum(ch.isalpha() for ch in term)  # "t-1", "x2": notation, not a name
        if (
            written_as_name
            and letters >= 2
            and is_specific(term)
            and not any(n in term.lower() for n in numbers)
        ):
            found.append(named(term))
    return list(dict.fromkeys(c for c in found if c.value))


def named(term: str) -> Constraint:
    """A name as a constraint, in normal form ("scikit-learn": "scikit learn")."""
    return Constraint("name", " ".join(folded_words(term.replace("-", " "))))


# "the Team plan", "the Winter Olympics": a capitalised word that picks one of a kind
_PICKED = re.compile(r"(?<![\w.'’-])([A-Z][A-Za-z]+)(?=\s+([A-Za-z][a-z]{2,})(?![\w'’-]))")
_ACRONYM = re.compile(r"(?<![\w.'’-])[A-Z]{2,}(?![\w'’-])")


def subjects(question: str) -> list[Constraint]:
    """The things of a kind a question picks by a capitalised word before the kind ("the
    Team plan"). Absent from a passage, one is weak evidence at most; a passage that
    gives another of that kind instead ("the Business plan costs ...") and never names
    the one asked is about another thing (`check`)."""
    text = normalize(question)
    initial = _initial_words(text)
    named = tuple(dict.fromkeys(w.lower() for w in _ACRONYM.findall(text)))
    found = [
        Constraint("subject", f"{word.lower()} {kind.lower()}", named)
        for word, kind in _PICKED.findall(text)
        if word not in initial
        and not {word.lower(), kind.lower()} & STOPWORDS
        and not kind.endswith(("ed", "ing"))  # "Edition released": a verb, not a kind
    ]
    return list(dict.fromkeys(found))


def _others_of_the_kind(subject: Constraint, said: str, context: str) -> list[str]:
    """What `said` picks of the subject's kind instead of the subject ("Business plan"
    for "team plan"), as it writes them; none where it or the context (`_words` of the
    passages drawn on and the sources' titles) names the subject's word: a product's
    guide rarely repeats the product's name ("annual Lumen subscription"). An acronym
    the question itself names is no other thing."""
    word, kind = subject.value.split(" ", 1)
    if f" {word} " in context or re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", said, re.I):
        return []
    initial = _initial_words(said)  # a sentence's first word has its place's capital
    pattern = rf"(?<![\w.'’-])([A-Z][A-Za-z]+)\s+(?i:{re.escape(kind)}(?:e?s)?)(?![\w'’-])"
    return [
        f"{other} {kind}"
        for other in dict.fromkeys(re.findall(pattern, said))
        if other not in initial
        and other.lower() not in STOPWORDS
        and other.lower() not in subject.besides
        and other.lower()[:4] != word[:4]  # "Definitive" where "Definite" is asked: a typo
    ]


def when(text: str) -> list[Constraint]:
    """The years, dates and versions a text asks about: what a source about the right
    topic may still miss (another year, another release); names are checked apart."""
    return [c for c in constraints(text) if c.kind != "name"]


def _words(texts: Sequence[str]) -> str:
    """The texts' words in normal form, hyphens as spaces, padded for whole-word search."""
    return " " + " ".join(" ".join(folded_words(t)) for t in texts).replace("-", " ") + " "


def _spelled_out(acronym: str, words: Sequence[str]) -> bool:
    """ "sgd" in "stochastic gradient descent": an acronym the evidence writes in full."""
    n = len(acronym)
    if not 2 <= n <= 6 or not acronym.isalpha():
        return False
    # Initials of words only: "the crag project" is no spelling of "tcp".
    initials = "".join(w[0] if w not in STOPWORDS else " " for w in words)
    return any(initials[i : i + n] == acronym for i in range(len(initials) - n + 1))


def check(
    question_constraints: Sequence[Constraint],
    evidence: Sequence[str],
    context: Sequence[str] | None = None,
) -> Check:
    """Which constraints the evidence meets, in normal form (plurals of names, and
    acronyms written in full, too).

    Years, dates and versions must be in the `evidence` (the passages the answer
    quotes): they constrain the fact. Names must be in the `context` (all the
    passages the answer drew on; the evidence by default): they are its topic, and a
    comparison's two names rarely share one passage.
    """
    joined = _words(context if context is not None else evidence)
    said = normalize(" ".join(evidence))
    low = said.lower()
    years = [c.value for c in question_constraints if c.kind == "year"]
    result = Check()
    for c in question_constraints:
        picked: list[str] = []  # a subject's others of its kind, read once
        if c.kind == "date":
            month, day = c.value.split()
            ok = any(
                m[:3] == month and int(d) == int(day)
                for m, d in _MONTH_DAY.findall(low)
                if m in MONTHS
            ) or any(
                int(d) == int(day) and m[:3] == month
                for d, m in re.findall(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+([a-z]{3,9})\b", low)
                if m in MONTHS
            )
        elif c.kind == "name":
            ok = named_in(c.value, joined)
        elif c.kind == "subject":  # only another of its kind contradicts
            picked = _others_of_the_kind(c, said, joined)
            ok = not picked
        elif c.kind in ("quarter", "half"):
            ok = any(c in periods(part) for part in _of_the_year(said, years))
        elif c.kind == "version":
            # "1.5" is met by "1.5" or "1.5.2", not "1.50"; a bare "3" (asked as "version
            # 3" or "v3") only in a version's form, "3.0", "3.x", "v3", "version 3": any
            # other "3" ("part 2 of 3") is just a number
            n = re.escape(c.value)
            end = r"(?![\w.]?\d|\w)"
            named = rf"(?:\bv|\bversion\s+|\brelease\s+){n}{end}"
            release = (
                rf"(?<![\w.]){n}(?:\.\d+)*{end}"
                if "." in c.value
                else rf"(?<![\w.]){n}(?:\.(?:\d+|x))+{end}|{named}"
            )
            ok = re.search(release, low) is not None
        else:
            ok = _as_written(c.value).search(low) is not None
        (result.met if ok else result.unmet).append(c)
        if ok:
            continue
        if c.kind == "year":
            others = YEAR.findall(said)
        elif c.kind == "version":
            others = versions(said)
        elif c.kind == "name":  # another numbered variant: GPT-3 for GPT-5
            others = other_variants(c.value, joined)
        elif c.kind in ("quarter", "half"):
            others = [p.value for p in periods(said) if p.kind == c.kind]
        elif c.kind == "subject":
            others = picked
        else:
            continue
        result.instead[c.value] = list(dict.fromkeys(v for v in others if v != c.value))
    return result


def _of_the_year(text: str, years: Sequence[str]) -> list[str]:
    """Where a quarter or half of the question's year may be read: a sentence that also
    names that year ("Q4 2023"; not "Q1 2023 ... Q4 2021"), or the whole text when the
    question asks no year."""
    if not years:
        return [text]
    named = [_as_written(y) for y in years]
    return [s for s in split_sentences(text) if all(y.search(s) for y in named)]


def _as_written(value: str) -> re.Pattern[str]:
    """A year or number as a text writes it: whole, not inside a longer number or
    version ("2023", not "12023" or "2023.1")."""
    return re.compile(rf"(?<![\w.]){re.escape(value)}(?![\w]|\.\d)")


def _digits_apart(words: str) -> str:
    """ "beta1" as "beta 1": a subscript is written glued or apart ("β_1", "beta1")."""
    return re.sub(r"(?<=[a-z])(?=\d)|(?<=\d)(?=[a-z])", " ", words)


def _base(name: str) -> str:
    """A numbered name's base: "resnet 50" → "resnet", "yolo v3" → "yolo" (itself if none)."""
    return re.sub(r"(?:\s*v?\d+[a-z]?)+$", "", _digits_apart(name)).strip()


def other_variants(name: str, joined: str) -> list[str]:
    """The other numbered variants of a numbered name that `joined` names ("gpt 3" where
    "gpt 5" is asked)."""
    base = _base(name)
    if base == _digits_apart(name) or len(base) < 2:
        return []
    found = re.findall(rf" {re.escape(base)} (v?\d+)(?= )", _digits_apart(joined))
    return [f"{base} {n}" for n in found if f"{base} {n}" != _digits_apart(name)]


def named_in(name: str, joined: str) -> bool:
    """Whether `joined` (`_words` of some texts) names `name` (folded words): as written,
    in plural, glued ("tfidf") or with digits apart ("beta 1"), as the initials of its
    spelled-out form ("sgd"), or by its base when the name is a numbered variant of it
    ("resnet 50" by "resnet", "yolo v3" by "yolo") and no other variant is named."""
    spaced = _digits_apart(joined)
    forms = {name, name.replace(" ", ""), _digits_apart(name)}
    if any(
        f" {f}{s} " in text for f in forms for s in ("", "s", "es") for text in (joined, spaced)
    ):
        return True
    if _spelled_out(name.replace(" ", ""), joined.split()):
        return True
    base = _base(name)
    if base == _digits_apart(name) or len(base) < 3 or f" {base} " not in spaced:
        return False
    return not other_variants(name, joined)


# --- the values a text states, by kind (for comparing what sources say) ------------------------

_NUMBER = re.compile(r"(?<![\w.])(\d+(?:,\d{3})*(?:\.\d+)?)(?![\w]|[.,]\d)")
# "v3", "version 3.1", "release 2": a release, not a quantity
_NAMED_RELEASE = re.compile(r"(?:\bv|\bversions?\s+|\breleases?\s+)$", re.I)
# "Lumen 2.4": a decimal after a name is its version; "4.1 Network Ports": a section number
_AFTER_NAME = re.compile(r"\b[A-Z][a-z]+\s+$")
_BEFORE_HEADING = re.compile(r"^\s+[A-Z][a-z]")


def _without_dates(text: str) -> str:
    """The text with its calendar dates blanked out (their digits are not quantities)."""
    low = text.lower()
    if len(low) != len(text):
        return text
    chars = list(text)
    for pattern in DATE_PATTERNS:
        for m in pattern.finditer(low):
            chars[m.start() : m.end()] = " " * (m.end() - m.start())
    return "".join(chars)


def _quantities(text: str) -> set[str]:
    """Numbers that count or measure something: not years, dates, versions or section
    numbers. "1,500" and "1500" are one value, and so are "3.0" and "3"."""
    text = _without_dates(text)
    found = set()
    for m in _NUMBER.finditer(text):
        raw, before, after = m.group(1), text[: m.start()], text[m.end() :]
        if YEAR.fullmatch(raw) or _NAMED_RELEASE.search(before[-10:]):
            continue
        if "." in raw and (_AFTER_NAME.search(before[-30:]) or _BEFORE_HEADING.match(after)):
            continue
        value = raw.replace(",", "")
        found.add(value.rstrip("0").rstrip(".") if "." in value else value)
    return found


def stated(text: str, kind: str) -> set[str]:
    """The values of one kind (`number`, `year`, `date`, `version`) a text states, in
    one form per value, so that two texts can be compared by what they say."""
    text = normalize(text)
    if kind == "number":
        return _quantities(text)
    if kind == "year":
        return set(YEAR.findall(text))
    if kind == "date":
        return {when.isoformat() for _, when in dates_in(text)} | set(YEAR.findall(text))
    if kind == "version":
        return {v.lower() for v in _VERSION.findall(text)}
    raise ValueError(f"unknown kind of value {kind!r}")
