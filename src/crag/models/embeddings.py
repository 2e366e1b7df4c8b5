"""Embeddings by name: `local` (MiniLM int8 ONNX, offline) or `openai:<model>`.

Every embedder is wrapped in `Remembering`, which also serves vectors the store
already holds: grading a chunk that retrieval just returned (with its stored
vector) then costs no model call. It also turns the model's own failures (a server
that is down, answers 500 or garbage, times out) into a `ProviderError` that names
the embeddings, so a question fails with one line instead of a client's traceback.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from crag.context import Context
from crag.errors import CragError, ProviderError
from crag.models.minilm import MiniLMEmbeddings
from crag.models.openai import leaves_machine, openai_identity, openai_kwargs
from crag.registry import Registry

SPEC_FORMS = (
    "`local` (MiniLM int8 ONNX, offline) or `openai:<model>` (e.g. openai:text-embedding-3-small)"
)


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

    def remember(self, texts: Sequence[str], vectors: Sequence[Any]) -> None:
        """Keep vectors this model made earlier (the store's), for later embed calls."""
        with self._lock:
            for text, vector in zip(texts, vectors, strict=True):
                self._known[text] = np.asarray(vector, dtype=np.float32)
                self._known.move_to_end(text)
            while len(self._known) > self.max_known:
                self._known.popitem(last=False)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            known = {i: self._known[t] for i, t in enumerate(texts) if t in self._known}
        todo = [i for i in range(len(texts)) if i not in known]
        fresh = self._call(self.inner.embed_documents, [texts[i] for i in todo]) if todo else []
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


Factory = Callable[[str, int, float, bool], Embeddings]  # (model, threads, timeout_s, redact)
EMBEDDINGS: Registry[Factory] = Registry("embeddings")


@EMBEDDINGS.register("local", "all-MiniLM-L6-v2 as int8 ONNX, offline")
def _local(model: str, threads: int, timeout_s: float, redact: bool) -> Embeddings:
    return MiniLMEmbeddings(threads=threads)


@EMBEDDINGS.register("openai", "openai:<model>, any OpenAI-compatible server")
def _openai(model: str, threads: int, timeout_s: float, redact: bool) -> Embeddings:
    from langchain_openai import OpenAIEmbeddings  # heavy: only when asked for

    kwargs = openai_kwargs(f"embeddings 'openai:{model}'", timeout_s)
    # Without check_embedding_ctx_length=False it downloads a tiktoken file.
    kwargs.update(model=model, check_embedding_ctx_length=False)
    if redact and leaves_machine():  # a server on loopback keeps the text on this machine
        from crag.models.masking import MaskedEmbeddings

        return MaskedEmbeddings(OpenAIEmbeddings(**kwargs))
    return OpenAIEmbeddings(**kwargs)


_CACHE: dict[tuple[object, ...], Remembering] = {}
_CACHE_LOCK = threading.Lock()


def make_embeddings(
    spec: str, *, threads: int = 0, timeout_s: float = 30, redact: bool = False
) -> Remembering:
    """The embedder named by `spec` (`name` or `name:model`), one per process and settings;
    `redact` masks what it sends to a server that is not on loopback."""
    spec = (spec or "").strip()
    name, model = EMBEDDINGS.split(spec, SPEC_FORMS)
    key: tuple[object, ...] = (spec, threads)
    if name == "openai":  # a changed key or server gets a new client
        outgoing = redact and leaves_machine()
        key += (timeout_s, outgoing, *openai_identity(f"embeddings {spec!r}"))
    with _CACHE_LOCK:
        if key not in _CACHE:
            inner = EMBEDDINGS[name](model, threads, timeout_s, redact)
            _CACHE[key] = Remembering(inner, name=spec)
        return _CACHE[key]


def embeddings_for(ctx: Context) -> Remembering:
    """The run's embedder, as Context configures it (model, threads, timeout, masking)."""
    return make_embeddings(
        ctx.models.embeddings,
        threads=ctx.models.threads,
        timeout_s=ctx.models.embeddings_timeout_s,
        redact=ctx.search.redact_queries,
    )
