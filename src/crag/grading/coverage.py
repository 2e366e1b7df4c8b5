"""The coverage check: what of a question the library cannot cover at all.

A library that never mentions a specific term of the question (AdaBoost, nginx),
or that names one side of a comparison only in passing, can answer at best part
of it: the grade node then caps the verdict at `ambiguous`, and the rewrite node
leads the web query with what is missing. The lookups are Chroma full-text
searches in the library, a few milliseconds each.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from collections.abc import Sequence
from pathlib import Path

from crag.context import Context
from crag.retrieval.library import contains_any, texts_containing
from crag.text import STOPWORDS, terms

# Chunks read per phrase when counting mentions: enough to find where a book explains it.
_MENTION_SCAN = 300
_TOKENIZER = Path(__file__).resolve().parent.parent / "data" / "minilm-tokenizer.json"


def key_terms(question: str) -> list[str]:
    """Words of the question that carry its topic: what a library must know to answer."""
    found = []
    for word in terms(question):
        bare = re.sub(r"['’]s$", "", word).strip(".'’")
        if len(bare) > 2 and bare.lower() not in STOPWORDS:
            found.append(bare)
    return list(dict.fromkeys(found))


@functools.cache
def _common_words() -> frozenset[str]:
    """Whole words of the embedding model's 30k-word BERT vocabulary: everyday English."""
    vocab = json.loads(_TOKENIZER.read_text(encoding="utf-8"))["model"]["vocab"]
    return frozenset(w for w in vocab if w.isalpha())


def is_specific(term: str) -> bool:
    """A term that names something (AdaBoost, TF-IDF, nginx), not an everyday word.

    The coverage check only asks the library about such terms: a small library may
    lack "according" or "customers" without lacking the question's topic.
    """
    if re.search(r"[-\d]", term) or re.search(r"[a-z][A-Z]", term):
        return True
    return term.lower() not in _common_words()


# "X vs Y", "difference between X and Y", "how does X differ from / compare with Y",
# "compare X with Y": the two things a comparison asks about.
_SIDES = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"(?P<a>[\w\-' ]+?)\s+(?:vs\.?|versus)\s+(?P<b>[^:?,;]+)",
        r"differences?\s+between\s+(?P<a>.+?)\s+and\s+(?P<b>[^:?,;]+)",
        r"\b(?:do|does|did|is|are)\s+(?P<a>.+?)\s+(?:differ|different)\s+from\s+(?P<b>[^:?,;]+)",
        r"\b(?:do|does)\s+(?P<a>.+?)\s+compare\s+(?:with|to)\s+(?P<b>[^:?,;]+)",
        r"\bcompare\s+(?P<a>.+?)\s+with\s+(?P<b>[^:?,;]+)",
        r"\bcompare\s+(?P<a>.+?)\s+(?:to|and)\s+(?P<b>[^:?,;]+)",
    )
]
_LEADING = re.compile(r"^(?:the|a|an|our|their|its)\s+", re.IGNORECASE)
# A side ends where its qualifiers start: "early stopping [for neural networks]".
_SIDE_END = re.compile(
    r"\s*(?:[,:;?!()]|\s(?:as|for|used|of|in|when|that|which|to|on|at|by|and|or|with|from"
    r"|is|are|do|does)\s).*$",
    re.IGNORECASE,
)


def comparison_sides(question: str) -> list[str]:
    """The things a comparison question compares, as short phrases; [] otherwise."""
    for pattern in _SIDES:
        match = pattern.search(question)
        if not match:
            continue
        sides = []
        for raw in (match["a"], match["b"]):
            side = _LEADING.sub("", raw.strip())
            side = _SIDE_END.sub("", f" {side} ").strip().rstrip(".")
            if side and len(side.split()) <= 5:
                sides.append(side)
        return sides
    return []


def _spellings(term: str) -> list[str]:
    """Forms a library may write a term in (case, hyphen or space, joined)."""
    forms = [term, term.lower(), term.capitalize()]
    if "-" in term:
        for joined in (term.replace("-", " "), term.replace("-", "")):
            forms += [joined, joined.lower()]
    return list(dict.fromkeys(forms))


def missing_terms(ctx: Context, collection: str, wanted: Sequence[str]) -> list[str]:
    """The terms that no chunk of the collection contains, in any usual spelling."""
    return [t for t in wanted if not contains_any(ctx, collection, _spellings(t))]


def most_mentions(ctx: Context, collection: str, phrases: Sequence[str]) -> dict[str, int]:
    """For each phrase, the most times one chunk names it (plurals and spellings too).

    A library that explains a thing names it again and again where it does; one that
    names it at most once per chunk only mentions it in passing.
    """
    counts = {}
    for phrase in phrases:
        texts = texts_containing(ctx, collection, _spellings(phrase), _MENTION_SCAN)
        parts = [re.escape(w) for w in re.split(r"[\s\-]+", phrase.lower()) if w]
        pattern = re.compile(r"\b" + r"[\s\-]*".join(parts) + r"(?:s|es)?\b")
        counts[phrase] = max((len(pattern.findall(t.lower())) for t in texts.values()), default=0)
    return counts


async def coverage_gaps(question: str, ctx: Context) -> tuple[list[str], list[str]]:
    """Specific terms of the question the library never mentions, and sides of a
    comparison it names only in passing (never twice in one chunk).

    The second case is the classic partial question: books that explain batch
    normalization and mention layer normalization once, here and there, can answer
    only half of "batch normalization vs layer normalization".
    """
    if not ctx.coverage_check:
        return [], []
    specific = [t for t in key_terms(question) if is_specific(t)]
    sides = comparison_sides(question)
    if not specific and not sides:  # most questions: nothing to look up
        return [], []
    missing, mentions = await asyncio.gather(
        asyncio.to_thread(missing_terms, ctx, ctx.collection, specific),
        asyncio.to_thread(most_mentions, ctx, ctx.collection, sides),
    )
    return missing, [side for side, most in mentions.items() if most == 1]
