"""An embedder that remembers: it also serves the vectors the store already holds, so
grading a chunk that retrieval just returned (with its stored vector) costs no model
call, and it turns the model's own failures (a server that is down, answers 500 or
garbage, times out) into a `ProviderError` that names the embeddings.

A retrieved chunk's strips are embedded the first time a question reads the chunk,
then remembered the same way. Grading scores a candidate by its best strip and
refinement scores every strip of the graded chunks. Ingest does not embed strips: that
doubled the cost of every chunk, and most chunks no question reads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from crag.directives import without_directives
from crag.errors import CragError, ProviderError
from crag.text import strips_of


class Remembering(Embeddings):
    """An embedder plus the vectors it is known to give for some texts."""

    def __init__(self, inner: Embeddings, max_known: int = 4096, *, name: str = "") -> None:
        self.inner = inner
        self.max_known = max_known
        self.name = name or type(inner).__name__
        self._known: OrderedDict[str, np.ndarray] = OrderedDict()
        self._queries: OrderedDict[str, tuple[float, ...]] = OrderedDict()
        self.max_queries = 64
        self._lock = threading.Lock()

    def remember(self, texts: Sequence[str], vectors: Sequence[Any] | np.ndarray) -> None:
        """Keep vectors this model made earlier (the store's), for later embed calls."""
        with self._lock:
            for text, vector in zip(texts, vectors, strict=True):
                self._known[text] = np.asarray(vector, dtype=np.float32)
                self._known.move_to_end(text)
            while len(self._known) > self.max_known:
                self._known.popitem(last=False)

    def unknown(self, texts: Sequence[str]) -> list[str]:
        """Those of `texts` whose vectors are not known (an embed call would run the model)."""
        with self._lock:
            return [t for t in texts if t not in self._known]

    def forget_queries(self) -> None:
        """Forget the questions embedded so far: a benchmark's systems each pay for their
        own, whichever asked the same question first."""
        with self._lock:
            self._queries.clear()

    def _vectors(self, texts: Sequence[str]) -> tuple[dict[int, np.ndarray], list[int], list[Any]]:
        """The known texts' vectors by position, and the positions and vectors of the
        others (one model call for them all)."""
        with self._lock:
            known = {i: self._known[t] for i, t in enumerate(texts) if t in self._known}
        todo = [i for i in range(len(texts)) if i not in known]
        fresh = list(
            self._call(self.inner.embed_documents, [texts[i] for i in todo]) if todo else []
        )
        if len(fresh) != len(todo):  # a vector lost or added would go beside another text
            raise ProviderError(
                f"embeddings {self.name!r} returned {len(fresh)} vectors for {len(todo)} texts"
            )
        return known, todo, fresh

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """`embed_documents` as one float32 array, the known vectors as they are kept:
        grading reads dozens of stored strip vectors a question."""
        known, todo, fresh = self._vectors(texts)
        rows: dict[int, np.ndarray] = dict(known)
        rows.update((i, np.asarray(v, dtype=np.float32)) for i, v in zip(todo, fresh, strict=True))
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([rows[i] for i in range(len(texts))])

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        known, todo, fresh = self._vectors(texts)
        out: list[list[float]] = [[] for _ in texts]
        for i, stored in known.items():
            out[i] = stored.tolist()
        for i, made in zip(todo, fresh, strict=True):
            out[i] = list(made)
        return out

    def embed_query(self, text: str) -> list[float]:
        """The question's vector; the last few are kept, since one run embeds its question
        more than once (the answer cache, retrieval, grading)."""
        with self._lock:
            known = self._queries.get(text)
            if known is not None:
                self._queries.move_to_end(text)
                return list(known)
        vector = [float(x) for x in self._call(self.inner.embed_query, text)]
        with self._lock:
            self._queries[text] = tuple(vector)
            while len(self._queries) > self.max_queries:
                self._queries.popitem(last=False)
        return vector

    def _call(self, method: Callable[[Any], Any], arg: Any) -> Any:
        try:
            return method(arg)
        except CragError:
            raise
        except Exception as exc:  # the model's server or runtime failed: say which model
            msg = " ".join(str(exc).split())
            if len(msg) > 200:
                msg = msg[:197] + "..."
            raise ProviderError(
                f"embeddings {self.name!r} failed: {type(exc).__name__}"
                + (f": {msg}" if msg else "")
            ) from exc


#: Chunk metadata an earlier ingest wrote (the strips' vectors); retrieval drops it.
STRIPS_KEY = "strip_vectors"


def strip_texts(text: str, sentences: int) -> list[str]:
    """Every strip of `text` that a question may score: the grader's (of the chunk's
    text), then those refinement reads that differ (of the text without directives).
    The chunk itself is not among them: its vector is stored anyway."""
    plain = [s for s in dict.fromkeys(strips_of(text, sentences)) if s and s != text]
    extra = strips_of(without_directives(text), sentences)
    return [*plain, *(s for s in dict.fromkeys(extra) if s and s != text and s not in plain)]


def remember_strips(embedder: Remembering, texts: Sequence[str], sentences: int) -> int:
    """Have the embedder know the vectors of every strip of `texts`; returns how many it
    had to embed. They are kept at float16 precision (cosines move by < 0.001), as
    stores once kept them, so a score does not depend on when a strip was embedded."""
    strips = list(dict.fromkeys(s for t in texts for s in strip_texts(t, sentences)))
    todo = embedder.unknown(strips)
    if todo:
        vectors = embedder.embed_array(todo)
        embedder.remember(todo, vectors.astype(np.float16).astype(np.float32))
    return len(todo)
