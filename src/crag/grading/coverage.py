"""The coverage check: what of a question the library cannot cover at all.

A library that never mentions a specific term of the question (AdaBoost, nginx),
or that names one side of a comparison only in passing, can answer at best part
of it: the grade node then caps the verdict at `ambiguous`, and the rewrite node
leads the web query with what is missing.

Lookups compare the normal form (`crag.text.normalize`, lower-cased) of the question
and of the library: a typeset book writes "β", "3×3" and "Gauss–Newton" where people
type "beta", "3x3" and "Gauss-Newton". The library's words (the run's tenant's chunks
only) are read once per library version (an ingest that changes it gives it a new one).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import re
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from crag.context import Context
from crag.retrieval.library import all_texts, library_version
from crag.text import STOPWORDS, folded_words, normalize, terms

_TOKENIZER = Path(__file__).resolve().parent.parent / "data" / "minilm-tokenizer.json"


def key_terms(question: str) -> list[str]:
    """Words of the question that carry its topic: what a library must know to answer."""
    found = []
    for word in terms(normalize(question)):
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
    if re.search(r"\d", term) or re.search(r"[a-z][A-Z]|-[A-Z]", term):
        return True  # a number, "AdaBoost", "Elastic-Net": written as a name
    # "trade-off", "well-known": a compound of everyday words is everyday English
    parts = [p for p in term.lower().split("-") if p]
    return any(p not in _common_words() for p in parts)


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


# Where a comparison is asked: the patterns run only around these words, on a bounded
# window, so a long text costs linear time (a side is a few words, never far away).
_ANCHOR = re.compile(r"\b(?:vs|versus|between|differ|different|compare)\b", re.IGNORECASE)
_WINDOW = 200
_MAX_ANCHORS = 20


def comparison_sides(question: str) -> list[str]:
    """The things a comparison question compares, as short phrases; [] otherwise."""
    windows = [
        question[max(0, a.start() - _WINDOW) : a.end() + _WINDOW]
        for a in itertools.islice(_ANCHOR.finditer(question), _MAX_ANCHORS)
    ]
    for pattern in _SIDES:
        match = next(filter(None, (pattern.search(w) for w in windows)), None)
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


def _forms(word: str) -> tuple[str, ...]:
    """A word and its singular or plural: "GANs" is found where the book says "GAN"."""
    if word.endswith("es") and len(word) > 4:
        return word, word[:-2], word[:-1]
    if word.endswith("s") and len(word) > 3:
        return word, word[:-1]
    return word, word + "s", word + "es"


class LibraryIndex:
    """The words of a library in normal form, and its chunks' normal-form texts."""

    def __init__(self, texts: Iterable[str]) -> None:
        texts = list(texts)
        self.texts = [normalize(t).lower() for t in texts]
        # a Greek letter inside a formula may be typed glued ("2pisigma") or apart
        spaced = [normalize(t, spaced_greek=True).lower() for t in texts if not t.isascii()]
        words: set[str] = set()
        for text in [*self.texts, *spaced]:
            for word in folded_words(text):
                words.add(word)
                if "-" in word:  # "tf-idf" is also "tf idf" and "tfidf"
                    words.update(word.split("-"))
                    words.add(word.replace("-", ""))
        self.words = frozenset(words)

    def has_word(self, word: str) -> bool:
        return any(form in self.words for form in _forms(word))

    def mentions(self, term: str) -> bool:
        """Whether the library names `term` in any usual spelling: as written, joined
        ("tfidf"), or its words side by side ("tf idf", "layer\nnormalization")."""
        parts = folded_words(term.replace("-", " "))
        if not parts or self.has_word("".join(parts)):
            return True
        if len(parts) == 1:
            return False
        return all(self.has_word(p) for p in parts) and self.most_mentions(term) > 0

    def most_mentions(self, phrase: str) -> int:
        """The most times one chunk names `phrase` (plurals, hyphens and spaces alike).

        A library that explains a thing names it again and again where it does; one
        that names it at most once per chunk only mentions it in passing.
        """
        parts = [re.escape(w) for w in folded_words(phrase.replace("-", " "))]
        if not parts:
            return 0
        # between its words: spaces, line breaks, hyphens or other punctuation ("u.s.")
        pattern = re.compile(r"(?<![a-z0-9])" + r"[\W_]*".join(parts) + r"(?:s|es)?(?![a-z0-9])")
        return max((len(pattern.findall(t)) for t in self.texts), default=0)


_INDEXES: dict[tuple[str, str, str, str], LibraryIndex] = {}
_INDEXES_LOCK = threading.Lock()


def library_index(ctx: Context, collection: str) -> LibraryIndex:
    """The index of the tenant's part of the collection, read once per version and process."""
    location = ctx.chroma_url or str(ctx.chroma_path.resolve())
    key = (location, collection, ctx.tenant, library_version(ctx, collection))
    with _INDEXES_LOCK:
        index = _INDEXES.get(key)
    if index is None:
        index = LibraryIndex(all_texts(ctx, collection))
        with _INDEXES_LOCK:
            for old in [k for k in _INDEXES if k[:3] == key[:3]]:
                del _INDEXES[old]  # an older version of the same library
            _INDEXES[key] = index
    return index


def missing_terms(ctx: Context, collection: str, wanted: Sequence[str]) -> list[str]:
    """The terms that no chunk of the collection names, in any usual spelling."""
    if not wanted:
        return []
    index = library_index(ctx, collection)
    return [t for t in wanted if not index.mentions(t)]


def most_mentions(ctx: Context, collection: str, phrases: Sequence[str]) -> dict[str, int]:
    """For each phrase, the most times one chunk names it."""
    if not phrases:
        return {}
    index = library_index(ctx, collection)
    return {phrase: index.most_mentions(phrase) for phrase in phrases}


async def coverage_gaps(question: str, ctx: Context) -> tuple[list[str], list[str]]:
    """Specific terms of the question the library never mentions, and sides of a
    comparison it names only in passing (never twice in one chunk).

    The second case is the classic partial question: books that explain batch
    normalization and mention layer normalization once, here and there, can answer
    only half of "batch normalization vs layer normalization".
    """
    if not ctx.coverage_check:
        return [], []
    # text and library work, off the event loop (a server keeps serving meanwhile)
    return await asyncio.to_thread(_gaps, question, ctx)


def _gaps(question: str, ctx: Context) -> tuple[list[str], list[str]]:
    specific = [t for t in key_terms(question) if is_specific(t)]
    sides = comparison_sides(normalize(question))
    if not specific and not sides:  # most questions: nothing to look up
        return [], []
    mentions = most_mentions(ctx, ctx.collection, sides)
    passing = [side for side, most in mentions.items() if most == 1]
    return missing_terms(ctx, ctx.collection, specific), passing
