"""What an answer cites: the kept strips grouped into numbered sources (file + page,
or URL), those sources as the model reads them, and the citations an answer gives,
each moved to the source that states its claim where the model cited one that does
not."""

from __future__ import annotations

import re

from crag import prompts
from crag.directives import without_directives
from crag.state import Citation, Passage, Strip
from crag.text import content_words, stem, stems

CITE = re.compile(r"\[(\d+)\]")


def number_sources(kept: list[Strip], docs: list[Passage]) -> list[tuple[Citation, list[Strip]]]:
    """Group kept strips by what a reader would cite (file + page, or URL), numbered
    [1], [2], ... in reading order, so two chunks of one page share one number."""
    by_id = {d["id"]: d for d in docs}
    groups: dict[tuple[str, ...], tuple[Citation, list[Strip]]] = {}
    for strip in kept:
        doc = by_id[strip["doc_id"]]
        where = doc.get("page") or doc.get("url") or doc.get("query") or ""
        key = (doc["origin"], doc["source"], where)
        if key not in groups:
            groups[key] = (citation_of(doc, len(groups) + 1), [])
        groups[key][1].append(strip)
    return list(groups.values())


def citation_of(doc: Passage, n: int) -> Citation:
    """Source `n`: where a reader finds the passage (file + page, or URL)."""
    citation: Citation = {"n": n, "origin": doc["origin"], "source": doc["source"]}
    for field in ("page", "url", "title", "query"):
        if doc.get(field):
            citation[field] = doc[field]  # type: ignore[literal-required,unused-ignore]
    return citation


def label(citation: Citation) -> str:
    if citation.get("query"):
        return f"{citation['source']} (SQL: {citation['query']})"
    if citation.get("url"):
        return f"{citation.get('title') or citation['source']} ({citation['url']})"
    if citation.get("page"):
        return f"{citation['source']}, page {citation['page']}"
    return citation["source"]


def render_sources(numbered: list[tuple[Citation, list[Strip]]], tag: str) -> str:
    blocks = [
        prompts.SOURCE_BLOCK.format(
            tag=tag,
            n=c["n"],
            label=without_directives(label(c)),
            origin=c["origin"],
            text=" ... ".join(s["text"] for s in strips),
        )
        for c, strips in numbered
    ]
    return "\n\n".join(blocks)


#: Opens the note of an answer made of the best passages because the model's failed.


_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w]|\.\d)")


def _states(text: str, numbers: list[str]) -> bool:
    return all(re.search(rf"(?<![\w.]){re.escape(x)}(?![\w]|\.\d)", text) for x in numbers)


#: The share of a claim's words a source must hold to state it (with all its figures).
STATES_CLAIM = 0.5


def _support(claim: str, text: str) -> float:
    """How much of a claim a source states: none unless it holds every figure the claim
    gives, else the share of the claim's words (stemmed) it holds."""
    numbers = [x for x in _NUMBER.findall(claim) if len(x) > 1]
    if not _states(text, numbers):
        return 0.0
    words = {stem(w) for w in content_words(claim)}
    return len(words & stems(text)) / len(words) if words else 1.0


def repointed(answer: str, numbered: list[tuple[Citation, list[Strip]]]) -> tuple[str, int]:
    """The answer with a citation moved where the cited source does not state the claim
    (the text since the previous mark, when it gives figures) and exactly one other
    source states it best, sentence and figures: a model often cites a document's first
    page for a figure on its second. A cited source that states the claim stays cited,
    even where another page repeats the figures. Returns the answer and how many moved."""
    texts = {c["n"]: " ".join(s["text"] for s in strips) for c, strips in numbered}
    pieces, last, moved = [], 0, 0
    for mark in CITE.finditer(answer):
        claim, n = answer[last : mark.start()], int(mark.group(1))
        if n in texts and any(len(x) > 1 for x in _NUMBER.findall(claim)):
            support = {k: _support(claim, text) for k, text in texts.items()}
            best = max(support.values())
            winners = [k for k, v in support.items() if v == best]
            if support[n] < STATES_CLAIM <= best and len(winners) == 1:
                n, moved = winners[0], moved + 1
        pieces.append(f"{claim}[{n}]")
        last = mark.end()
    return "".join(pieces) + answer[last:], moved


def cited(answer: str, numbered: list[tuple[Citation, list[Strip]]]) -> list[Citation]:
    """The citations the answer refers to; all sources if it cites none."""
    used = {int(m) for m in CITE.findall(answer)}
    citations = [c for c, _ in numbered]
    return [c for c in citations if c["n"] in used] or citations
