"""Embeddings by name: `local` (MiniLM int8 ONNX, offline) or `openai:<model>`.

Every embedder is wrapped in `Remembering` (`crag.models.remembering`), one per process
and settings. The libraries behind an embedder load when one is made: naming the
embeddings (help, checks) and an ingest with nothing to embed load none of them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from crag.context import Context
from crag.models.openai import leaves_machine, openai_identity, openai_key, openai_kwargs
from crag.registry import Registry

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from crag.models.remembering import Remembering

SPEC_FORMS = (
    "`local` (MiniLM int8 ONNX, offline) or `openai:<model>` (e.g. openai:text-embedding-3-small)"
)


Factory = Callable[[str, int, float, bool], "Embeddings"]  # (model, threads, timeout_s, redact)
EMBEDDINGS: Registry[Factory] = Registry("embeddings")


@EMBEDDINGS.register("local", "all-MiniLM-L6-v2 as int8 ONNX, offline")
def _local(model: str, threads: int, timeout_s: float, redact: bool) -> Embeddings:
    from crag.models.minilm import MiniLMEmbeddings

    return MiniLMEmbeddings(threads=threads)


@EMBEDDINGS.register(
    "openai",
    "openai:<model>, any OpenAI-compatible server",
    ready=lambda: openai_key("embeddings 'openai'"),
)
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
    from crag.models.remembering import Remembering

    with _CACHE_LOCK:
        if key not in _CACHE:
            inner = EMBEDDINGS[name](model, threads, timeout_s, redact)
            _CACHE[key] = Remembering(inner, name=spec)
        return _CACHE[key]


def embeddings_ready(ctx: Context) -> None:
    """Raise ProviderError if the run's embedder cannot start here (a missing key)."""
    EMBEDDINGS.check_ready(ctx.models.embeddings.partition(":")[0])


def embeddings_for(ctx: Context) -> Remembering:
    """The run's embedder, as Context configures it (model, threads, timeout, masking)."""
    return make_embeddings(
        ctx.models.embeddings,
        threads=ctx.models.threads,
        timeout_s=ctx.models.embeddings_timeout_s,
        redact=ctx.search.redact_queries,
    )
