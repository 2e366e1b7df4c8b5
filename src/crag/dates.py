"""Calendar dates as texts and metadata write them: the dates a text states, one date
as metadata gives it, and the date a document gives itself near its top. Ingest stores
a document's date; grading compares dates with the question's and rates recency."""

from __future__ import annotations

import re
from datetime import date

from crag.text import normalize

_Y = r"(1[89]\d\d|20\d\d)"
#: A year a text writes (1800-2099), not part of a longer number or version.
YEAR = re.compile(rf"(?<![\w.]){_Y}(?!\w|\.\d)")
_ISO_DATE = re.compile(rf"(?<![\w.]){_Y}[-/](\d{{1,2}})[-/](\d{{1,2}})(?![\d/]|\.\d)")
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+([a-z]{{3,9}})\.?,?\s+{_Y}\b")
_MONTH_DAY_YEAR = re.compile(rf"\b([a-z]{{3,9}})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+{_Y}\b")
_PDF_DATE = re.compile(r"^\s*(?:D:)?(\d{4})(\d{2})(\d{2})")
_MONTH_NUMBER = {
    m: i
    for i, names in enumerate(
        ("jan january", "feb february", "mar march", "apr april", "may", "jun june",
         "jul july", "aug august", "sep sept september", "oct october", "nov november",
         "dec december"),
        start=1,
    )
    for m in names.split()
}  # fmt: skip

#: The ways a text writes a full date, each matched in lower case.
DATE_PATTERNS = (_ISO_DATE, _DAY_MONTH_YEAR, _MONTH_DAY_YEAR)


def _calendar(year: str, month: str | int, day: str) -> date | None:
    number = _MONTH_NUMBER.get(month) if isinstance(month, str) else month
    try:
        return date(int(year), number, int(day)) if number else None
    except ValueError:  # 31 February
        return None


def dates_in(text: str) -> list[tuple[int, date]]:
    """The calendar dates a text writes out (2024-10-03, 3 October 2024, Oct. 3rd, 2024),
    with where each starts, in reading order. A year or a month alone is no date."""
    low = normalize(text).lower()
    found: dict[int, date] = {}
    for m in _ISO_DATE.finditer(low):
        if when := _calendar(m[1], int(m[2]), m[3]):
            found[m.start()] = when
    for m in _DAY_MONTH_YEAR.finditer(low):
        if when := _calendar(m[3], m[2], m[1]):
            found.setdefault(m.start(), when)
    for m in _MONTH_DAY_YEAR.finditer(low):
        if when := _calendar(m[3], m[1], m[2]):
            found.setdefault(m.start(), when)
    return sorted(found.items())


def read_date(value: str) -> date | None:
    """One date as metadata gives it: ISO 8601 (a time may follow), a PDF date
    (D:20241003120000Z), an HTTP date (Thu, 03 Oct 2024 ...) or as text writes it."""
    if m := _PDF_DATE.match(value):
        return _calendar(m[1], int(m[2]), m[3])
    found = dates_in(value[:64])
    return found[0][1] if found else None


# Words that introduce a document's own date ("Last updated: 3 May 2024", "Posted on ...").
_DATE_CUE = re.compile(
    r"\b(?:published|posted|updated|revised|released|dated|effective|issued|written|modified"
    r"|as of|date)\b[^.\n]{0,40}$"
)


def document_date(text: str, head: int = 1500, byline: int = 300) -> date | None:
    """The date a document gives itself near its top: the latest date a dating word
    introduces ("updated 3 May 2024"), else the first date of its opening lines (a
    byline). Dates further down are what the document talks about, not when it was
    written."""
    opening = normalize(text[:head]).lower()
    dates = dates_in(opening)
    cued = [when for at, when in dates if _DATE_CUE.search(opening[max(0, at - 60) : at])]
    if cued:
        return max(cued)
    return next((when for at, when in dates if at < byline), None)
