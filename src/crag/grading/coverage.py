"""The coverage check: what of a question the library cannot cover at all.

A library that never mentions a specific term of the question (AdaBoost, nginx)
can answer at best part of it: the grade node then caps the verdict at `ambiguous`,
and the rewrite node leads the web query with what is missing.

Lookups compare the normal form (`crag.text.normalize`, lower-cased) of the question
and of the library: a typeset book writes "β", "3×3" and "Gauss–Newton" where people
type "beta", "3x3" and "Gauss-Newton". The library's words (the run's tenant's chunks
only) are read once per library version (an ingest that changes it gives it a new one).

The library's side of the lookup, in any usual spelling, is
`crag.retrieval.library_index`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from pathlib import Path

from crag.context import Context
from crag.retrieval.library_index import missing_terms
from crag.text import (
    STOPWORDS,
    normalize,
    slips,
    split_sentences,
    terms,
    without_clitic,
    word_forms,
)

_TOKENIZER = Path(__file__).resolve().parent.parent / "data" / "minilm-tokenizer.json"
_ACRONYM = re.compile(r"[A-Z][A-Z0-9]{1,5}")


def key_terms(question: str) -> list[str]:
    """Words of the question that carry its topic: what a library must know to answer."""
    found = []
    for word in terms(normalize(question)):
        bare = without_clitic(word)
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
    if re.search(r"\d", term) or re.search(r"[a-z][A-Z]|-[A-Z]", term):
        return True  # a number, "AdaBoost", "Elastic-Net": written as a name
    # "trade-off", "well-known": a compound of everyday words is everyday English
    parts = [p for p in term.lower().split("-") if p]
    return any(p not in _common_words() for p in parts)


async def coverage_gaps(question: str, ctx: Context) -> list[str]:
    """Specific terms of the question the library never mentions in any spelling."""
    if not ctx.grading.coverage_check:
        return []
    # text and library work, off the event loop (a server keeps serving meanwhile)
    return await asyncio.to_thread(_gaps, question, ctx)


def misspelt(term: str) -> bool:
    """A lower-case word one typing slip (a letter dropped, added, changed or two
    swapped) from an everyday word: "enviroment" is "environment", not a name."""
    common = _common_words()
    if any(form in common for form in word_forms(term)):
        return False
    return any(form in common for w in slips(term) for form in word_forms(w))


def head_of(term: str) -> str:
    """The thing a descriptive compound names: "CPU-heavy" and "GPU-accelerated" speak of
    a CPU and a GPU (an acronym with an everyday word after it); other terms as they are."""
    head, dash, tail = term.rpartition("-")
    if dash and _ACRONYM.fullmatch(head) and tail.islower() and tail in _common_words():
        return head
    return term


def specific_terms(question: str) -> list[str]:
    """The question's terms that name something: specific in themselves (`is_specific`),
    or capitalised inside a sentence, as English writes a name made of everyday words
    ("the Nebula Ultra plan", "the Super Bowl"), unless every word of the sentence is. A
    misspelt everyday word names nothing."""
    named: set[str] = set()
    for sentence in split_sentences(normalize(question)):
        words = [w for w in sentence.split()[1:] if w[:1].isalpha()]
        capitals = [without_clitic(w.strip(',;:!?’"()')) for w in words if w[:1].isupper()]
        if len(words) >= 3 and len(capitals) == len(words):
            continue  # typed in capitals or Title Case: a capital marks no name here
        named.update(capitals)
    found = [head_of(t) for t in key_terms(question) if is_specific(t) or t in named]
    return list(dict.fromkeys(t for t in found if not misspelt(t)))


def _gaps(question: str, ctx: Context) -> list[str]:
    return missing_terms(ctx, ctx.store.collection, specific_terms(question))
