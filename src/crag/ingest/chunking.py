"""Pages → overlapping chunks that end on headings, paragraphs or sentences.

Chunks never cross a page, so every chunk cites exactly one page and its text
is a verbatim slice of that page's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crag.ingest.loaders import NUMBERED_HEADING, Page

if TYPE_CHECKING:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

#: Bump when the text extraction or splitting rules change: it is part of every chunk
#: id, so a new version re-indexes files instead of mixing old and new chunks.
# 2: page markers and short documents' running lines dropped; 3: document dates and kinds
# in the metadata (an ingest re-writes the chunks, reusing their vectors; until then
# chunks without them read as undated); 4: a PDF's title block in the metadata (front matter,
# read out of the chunks it opens)
CHUNKER_VERSION = "4"

#: Chunks with fewer word characters than this (a lone figure number, a stray
#: heading) carry nothing worth retrieving.
MIN_WORD_CHARS = 12

# Ordered from the most to the least preferred boundary. Regexes without capture
# groups: the splitter wraps each in one to keep the separator.
_SENTENCE_AT_EOL = r"(?<=[.!?:;])\n"
_SENTENCE = r"(?<=[.!?])[ \t]+(?=[\"'“‘(\[]?[A-Z0-9])"
_TAIL = [_SENTENCE_AT_EOL, _SENTENCE, r"\n", r"(?<=[,;:])[ \t]+", r"[ \t]+", ""]
SEPARATORS: dict[str, list[str]] = {
    # pypdf emits one line per visual line and no blank lines, so numbered
    # headings ("3.1.2 Loss Function", "Chapter 4 ...") mark the paragraphs.
    "pdf": [
        r"\n[ \t]*\n",
        rf"\n(?={NUMBERED_HEADING})",
        *_TAIL,
    ],
    "markdown": [r"\n(?=#{1,6}[ \t])", r"\n(?=[^\n]*\n(?:=+|-+)[ \t]*\n)", r"\n[ \t]*\n", *_TAIL],
    "text": [r"\n[ \t]*\n", *_TAIL],
}


@dataclass(frozen=True)
class Chunk:
    index: int  # position within the file, from 0
    text: str
    page: str | None  # page label, None for files without pages
    page_number: int  # 1-based physical page


def chunker_signature(chunk_size: int, chunk_overlap: int) -> str:
    """Identifies the chunking rules and sizes; equal signature → equal chunks."""
    return f"rc{CHUNKER_VERSION}:{chunk_size}:{chunk_overlap}"


def make_splitter(kind: str, chunk_size: int, chunk_overlap: int) -> RecursiveCharacterTextSplitter:
    """The splitter for a kind of text (imported here: an unchanged re-ingest splits
    nothing, and langchain_text_splitters costs half a second to import)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return RecursiveCharacterTextSplitter(
        separators=SEPARATORS.get(kind, SEPARATORS["text"]),
        is_separator_regex=True,
        keep_separator="end",
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        strip_whitespace=True,
    )


_WORD = re.compile(r"\w")


def _spans(text: str, pieces: list[str]) -> list[tuple[int, int]]:
    """Where each (stripped, possibly overlapping) piece sits in the page text."""
    spans, cursor = [], 0
    for piece in pieces:
        start = text.find(piece, cursor)
        if start < 0:  # not expected: the splitter only cuts and strips
            start = text.find(piece)
        spans.append((start, start + len(piece)))
        cursor = max(start + 1, 0)
    return spans


def _merge_small(text: str, pieces: list[str], chunk_size: int) -> list[str]:
    """Fold fragments (a sentence carried over from the previous page, the tail
    of a long section) into a neighbour on the same page when both still fit."""
    small = chunk_size // 4
    spans = _spans(text, pieces)
    if any(a < 0 for a, _ in spans):
        return pieces
    i = 0
    while i < len(spans):
        a, b = spans[i]
        if b - a < small and len(spans) > 1:
            prev_len = spans[i][1] - spans[i - 1][0] if i > 0 else None
            next_len = spans[i + 1][1] - a if i + 1 < len(spans) else None
            options = [(n, j) for n, j in ((prev_len, i - 1), (next_len, i + 1)) if n is not None]
            n, j = min(options)
            if n <= chunk_size:
                lo, hi = min(i, j), max(i, j)
                spans[lo : hi + 1] = [(spans[lo][0], max(spans[lo][1], spans[hi][1]))]
                i = max(lo - 1, 0)
                continue
        i += 1
    return [text[a:b].strip() for a, b in spans]


def chunk_pages(pages: list[Page], kind: str, chunk_size: int, chunk_overlap: int) -> list[Chunk]:
    """Split each page on its own and number the chunks through the file."""
    splitter = make_splitter(kind, chunk_size, chunk_overlap)
    chunks: list[Chunk] = []
    for page in pages:
        pieces = _merge_small(page.text, splitter.split_text(page.text), chunk_size)
        for piece in pieces:
            if len(_WORD.findall(piece)) < MIN_WORD_CHARS:
                continue
            chunks.append(Chunk(len(chunks), piece, page.label, page.number))
    return chunks
