"""What the library as a whole says, read once per library version and process: its
words in normal form (so that a term is found in any usual spelling), its chunks'
texts, and its boilerplate.

Lookups compare the normal form (`crag.text.normalize`, lower-cased) of a term and of
the library: a typeset book writes "β", "3×3" and "Gauss–Newton" where people type
"beta", "3x3" and "Gauss-Newton". Only the run's tenant's chunks are read.

Boilerplate is a sentence found word for word in several of the library's documents (a
series disclaimer, a licence or copyright notice), and the title block a document opens
with (its front matter, recorded at ingest): they say nothing about any question, so
they are taken out of every passage read from the library before it is graded,
refined or quoted.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from crag.context import Context
from crag.retrieval.library import sourced_texts
from crag.retrieval.tenancy import library_version
from crag.text import (
    folded_words,
    named_pattern,
    named_pieces,
    normalize,
    sentence_key,
    slips,
    split_sentences,
    word_forms,
    word_variants,
)

if TYPE_CHECKING:
    from crag.state import Passage

#: Documents that must share a sentence word for word for it to be boilerplate: two may
#: be editions or copies of one work; a notice is printed in every document of a series.
BOILERPLATE_DOCUMENTS = 3
#: Words (not numbers) a boilerplate sentence has at least: shorter ones ("See Figure 2.",
#: a numbered heading "1.6 Exercises") are phrases that any texts may share.
BOILERPLATE_WORDS = 4


def boilerplate(sourced: Iterable[tuple[str, str]]) -> frozenset[str]:
    """Keys of the sentences that `BOILERPLATE_DOCUMENTS` documents or more share."""
    found: dict[str, set[str]] = {}
    for source, text in sourced:
        for sentence in split_sentences(text):
            key = sentence_key(sentence)
            if sum(not w.isdigit() for w in key.split()) >= BOILERPLATE_WORDS:
                found.setdefault(key, set()).add(source)
    return frozenset(k for k, docs in found.items() if len(docs) >= BOILERPLATE_DOCUMENTS)


class LibraryIndex:
    """The words of a library in normal form, its chunks' normal-form texts, and the
    sentences that are boilerplate in it (when its texts come with their sources)."""

    def __init__(
        self,
        texts: Iterable[str],
        sources: Iterable[str] | None = None,
        fronts: Mapping[str, str] | None = None,
    ) -> None:
        texts = list(texts)
        self.fronts = dict(fronts or {})
        self.boilerplate: frozenset[str] = frozenset()
        if sources is not None:  # a notice follows the title block: read without it
            pairs = zip(sources, texts, strict=True)
            self.boilerplate = boilerplate((s, self.without_front_matter(t, s)) for s, t in pairs)
        self.texts = [normalize(t).lower() for t in texts]
        chunks: Counter[str] = Counter()  # how many chunks write each word
        for raw, text in zip(texts, self.texts, strict=True):
            # a Greek letter inside a formula may be typed glued ("2pisigma") or apart
            spaced = "" if raw.isascii() else normalize(raw, spaced_greek=True).lower()
            words: set[str] = set()
            for word in [*folded_words(text), *folded_words(spaced)]:
                words.add(word)
                if "-" in word:  # "tf-idf" is also "tf idf" and "tfidf"
                    words.update(word.split("-"))
                    words.add(word.replace("-", ""))
            chunks.update(words)
        self.words = frozenset(chunks)
        #: Words of one chunk only: too weak to mend a typing slip to.
        self.once = frozenset(w for w, n in chunks.items() if n == 1)

    def without_front_matter(self, text: str, source: str) -> str:
        """`text` without the title block of document `source`, if it opens with it."""
        front = self.fronts.get(source)
        if not front:
            return text
        lines, title = text.split("\n"), front.split("\n")
        n = 0
        while n < min(len(lines), len(title)) and lines[n].strip() == title[n]:
            n += 1
        return "\n".join(lines[n:]) if n == len(title) else text

    def without_boilerplate(self, text: str, source: str = "") -> str:
        """`text` (of document `source`) without the library's boilerplate sentences and
        the title block of its document that it opens with (the rest as it was)."""
        text = self.without_front_matter(text, source)
        if not self.boilerplate:
            return text
        for sentence in split_sentences(text):
            if sentence_key(sentence) in self.boilerplate:
                spelled = r"\s+".join(map(re.escape, sentence.split()))
                text = re.sub(spelled, "", text, count=1)
        return text.strip()

    def has_word(self, word: str) -> bool:
        """Whether the library writes `word` as given or in another usual form (singular
        or plural, British or American spelling, a past participle's verb)."""
        return any(v in self.words for form in word_forms(word) for v in word_variants(form))

    def mentions(self, term: str) -> bool:
        """Whether the library names `term` in any usual spelling: as written, joined
        ("tfidf"), its words side by side ("tf idf", "layer\nnormalization"), or, for a
        long lower-case word, with one slip of its letters mended ("dropuot" is
        "dropout"). A slip is mended only to a word of several chunks: "boosting" is one
        slip from "boasting", which a book may write once."""
        parts = folded_words(term.replace("-", " "))
        if not parts or self.has_word("".join(parts)):
            return True
        if len(parts) == 1:
            near = slips(term, same_letters=True)
            forms = {form for word in near for form in word_forms(word)}
            return any(w in self.words and w not in self.once for w in forms)
        return all(self.has_word(p) for p in parts) and self.most_mentions(term) > 0

    def most_mentions(self, phrase: str) -> int:
        """The most times one chunk names `phrase` (plurals, hyphens and spaces alike).

        A library that explains a thing names it again and again where it does; one
        that names it at most once per chunk only mentions it in passing.
        """
        pattern = named_pattern(phrase)
        if pattern is None:
            return 0
        # a substring search first: the pattern is read only where all its pieces are
        pieces = [piece for word in named_pieces(phrase) for piece in word]
        return max(
            (len(pattern.findall(t)) for t in self.texts if all(p in t for p in pieces)),
            default=0,
        )


_INDEXES: dict[tuple[str, str, str, str], LibraryIndex] = {}
_INDEXES_LOCK = threading.Lock()


def library_index(ctx: Context, collection: str) -> LibraryIndex:
    """The index of the tenant's part of the collection, read once per version and process."""
    location = ctx.store.chroma_url or str(ctx.store.chroma_path.resolve())
    key = (location, collection, ctx.store.tenant, library_version(ctx, collection))
    with _INDEXES_LOCK:
        index = _INDEXES.get(key)
    if index is None:
        sourced, fronts = sourced_texts(ctx, collection)
        index = LibraryIndex([t for _, t in sourced], [s for s, _ in sourced], fronts)
        with _INDEXES_LOCK:
            for old in [k for k in _INDEXES if k[:3] == key[:3]]:
                del _INDEXES[old]  # an older version of the same library
            _INDEXES[key] = index
    return index


def without_boilerplate(
    ctx: Context, collection: str, docs: Sequence[Passage]
) -> tuple[list[Passage], int]:
    """The passages read from `collection` without its boilerplate sentences, and how many
    were nothing else (those go)."""
    index = library_index(ctx, collection)
    kept: list[Passage] = []
    for doc in docs:
        text = index.without_boilerplate(doc["text"], doc.get("source", ""))
        if folded_words(text):
            kept.append(doc if text == doc["text"] else {**doc, "text": text})
    return kept, len(docs) - len(kept)


def missing_terms(ctx: Context, collection: str, wanted: Sequence[str]) -> list[str]:
    """The terms that no chunk of the collection names, in any usual spelling."""
    if not wanted:
        return []
    index = library_index(ctx, collection)
    return [t for t in wanted if not index.mentions(t)]


def library_texts(ctx: Context, collection: str) -> list[str]:
    """Every chunk of the tenant's part of the collection, in normal form, lower case."""
    return library_index(ctx, collection).texts
