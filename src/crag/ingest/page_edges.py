"""A PDF page's edges: the running headers, footers and page numbers that repeat on its
pages (noise in every chunk's embedding, and quoted by an extractive answer), and the
page each page is cited as."""

from __future__ import annotations

import re
from collections import Counter


def cited_labels(labels: list[str]) -> list[str]:
    """The page each page is cited as: its printed label, its place in the file where it
    has none, and both where two pages would be cited alike (unlabelled cover pages
    before a body numbered from 1, two parts each numbered from 1): a reader must find
    the one page a citation names."""
    shown = [label or str(i + 1) for i, label in enumerate(labels)]
    twice = {label for label, n in Counter(shown).items() if n > 1}
    return [
        f"{label} (PDF page {i + 1})" if label in twice else label for i, label in enumerate(shown)
    ]


_DIGITS = re.compile(r"\d+")


def _line_key(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.split()).lower())


# A line that only says where the reader is: "12", "- 12 -", "Page 3", "Title - page 2 of 9".
_PAGE_MARKER = re.compile(
    r"^(?:.{0,120}?\s*[\-\u2013\u2014|\u00b7,]\s*)?(?:page|p\.|pg\.?)\s*\d{1,5}"
    r"(?:\s*(?:of|/)\s*\d{1,5})?$|^[\-\u2013\u2014\s]*\d{1,5}[\-\u2013\u2014\s]*$",
    re.IGNORECASE,
)


_BARE_NUMBER = re.compile(r"^\d{1,5}$")


def is_page_marker(line: str) -> bool:
    return bool(_PAGE_MARKER.match(" ".join(line.split())[:200]))


def strip_running_lines(texts: list[str], edge: int = 2) -> list[str]:
    """Drop running headers/footers ("Title - page 12") from the edges of pages.

    They repeat on most pages, so in chunks they only add noise to every embedding,
    and an extractive answer would quote them. A line counts as running when, with
    digits masked, it sits in the first or last `edge` lines of at least half the
    pages (and of 3+; of every page in a document of 2-3 pages); a page-number line
    at a page's edge is dropped in any document. A line that is a bare number is the
    page's number only where it counts with the pages (its own page's index, or the
    same offset from it on two pages or more): else it is a program's output, a table's
    last cell.
    """
    split = [t.split("\n") for t in texts]
    seen: Counter[str] = Counter()
    offsets: Counter[int] = Counter()
    for i, lines in enumerate(split):
        edges = [x for x in lines[:edge] + lines[-edge:] if x.strip()]
        seen.update({_line_key(x) for x in edges})
        offsets.update({int(x) - i for x in edges if _BARE_NUMBER.match(x.strip())})
    threshold = max(3, (len(texts) + 1) // 2) if len(texts) >= 4 else max(2, len(texts))
    running = {k for k, n in seen.items() if n >= threshold} - {"#"}
    steady = {o for o, n in offsets.items() if n >= 2} | {1}

    def furniture(line: str, i: int) -> bool:
        if _BARE_NUMBER.match(line.strip()):
            return int(line) - i in steady
        return not line.strip() or _line_key(line) in running or is_page_marker(line)

    out = []
    for i, lines in enumerate(split):
        head, tail = 0, len(lines)
        while head < min(edge, tail) and furniture(lines[head], i):
            head += 1
        while tail > head and tail > len(lines) - edge and furniture(lines[tail - 1], i):
            tail -= 1
        out.append("\n".join(lines[head:tail]))
    return out
