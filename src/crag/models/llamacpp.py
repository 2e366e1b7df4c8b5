"""A LangChain chat model over llama.cpp, in process, via xllamacpp.

xllamacpp ships prebuilt wheels (llama-cpp-python compiles for minutes on two
cores) and exposes llama.cpp's own server as Python calls that take and return
OpenAI-format dicts, logprobs and JSON-schema output included. This adapter
keeps those dicts OpenAI-shaped so the graph has one code path for the local
model and ChatOpenAI (e.g. the judge reads `response_metadata["logprobs"]`).

One model is loaded per (path, n_ctx) per process, on first call, with that run's
`threads` and `slots`; a run asking for others (a server's client can) uses it as it
is: a second copy of a 1.5B model would only halve the speed of both on a small CPU,
and the slots stay one first-come, first-served line. With `slots` > 1 llama.cpp
decodes that many calls together (continuous batching); further calls wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import os
import queue
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
)
from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import BaseModel, ConfigDict, Field

from crag.errors import ProviderError
from crag.models import ARRIVALS, Slots, cpu_count
from crag.models.model_files import ensure_local_gguf
from crag.models.openai_format import (
    PASSTHROUGH,
    content_text,
    normalize_response_format,
    openai_logprobs,
    to_openai_messages,
)

DEFAULT_N_CTX = 4096

log = logging.getLogger(__name__)


class LlamaCppError(RuntimeError):
    """llama.cpp refused a request (e.g. the prompt does not fit the context)."""


@dataclass
class _Engine:
    server: Any
    slots: Slots = field(default_factory=Slots)
    load_s: float = 0.0
    shape: tuple[int, int] = (0, 1)  # (threads, slots) it was loaded with


_ENGINES: dict[tuple[str, int], _Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _load_engine(path: str, n_ctx: int, threads: int, slots: int = 1) -> _Engine:
    """The process-wide server for this model; loads it (~1-3 s) on first use. Each of
    its `slots` has a context of `n_ctx` tokens."""
    key = (path, n_ctx)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is not None:
            if engine.shape != (threads, slots):
                log.info("local model as loaded: threads=%d local_slots=%d use it", threads, slots)
            return engine
        try:
            import xllamacpp as xlc  # the optional `crag[local]` extra
        except ImportError as exc:
            raise ProviderError(
                "the local chat model needs xllamacpp; install it with: pip install 'crag[local]'"
            ) from exc
        if not os.path.isfile(path):
            raise ProviderError(f"local model file not found: {path}")
        params = xlc.CommonParams()
        params.model.path = path
        params.n_ctx = n_ctx * slots
        params.n_parallel = slots
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.sampling.temp = 0.0
        params.sampling.seed = 0
        params.cache_ram_mib = 512  # host prompt cache; llama.cpp's default is 8 GiB
        params.verbosity = 3 if os.environ.get("CRAG_DEBUG") else 0
        # crag calls the server in process: its loopback HTTP side gets a key nobody knows
        params.api_keys = [secrets.token_hex(16)]
        params.ui = False
        params.endpoint_slots = False
        t0 = time.monotonic()
        server = xlc.Server(params)
        engine = _Engine(server, Slots(slots), time.monotonic() - t0, (threads, slots))
        _ENGINES[key] = engine
        return engine


class LlamaCppChatModel(BaseChatModel):
    """Chat model over a local GGUF file (llama.cpp, in process, thread-safe), loaded by
    the first call in its worker thread: a node that makes one never blocks its loop."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model_path: str
    model_cache: str | None = None  # the bundled model: assembled here by the first call
    n_ctx: int = DEFAULT_N_CTX
    threads: int = 0
    slots: int = Field(default=1, ge=1)  # calls decoded together
    queue_timeout_s: float | None = None  # longest wait for a free slot (None: no limit)
    max_tokens: int | None = 512
    temperature: float = 0.0
    stop: list[str] | None = None

    @property
    def _llm_type(self) -> str:
        return "llamacpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return self.model_dump(include={"model_path", "n_ctx", "max_tokens", "temperature"})

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "llamacpp"
        params["ls_model_name"] = os.path.basename(self.model_path)
        return params

    # --- engine ------------------------------------------------------------------
    def _engine(self) -> _Engine:
        if self.model_cache is not None:
            ensure_local_gguf(Path(self.model_cache))
        return _load_engine(self.model_path, self.n_ctx, self.threads or cpu_count(), self.slots)

    def load(self) -> float:
        """Load the model now (else the first call does); returns the load time in s."""
        return self._engine().load_s

    # --- calls -------------------------------------------------------------------
    def _request(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        req: dict[str, Any] = {
            "messages": to_openai_messages(messages),
            "temperature": self.temperature,
            "stream": False,
        }
        max_tokens = kwargs.pop("max_tokens", kwargs.pop("max_completion_tokens", self.max_tokens))
        if max_tokens is not None:
            req["max_tokens"] = int(max_tokens)
        stops = stop if stop is not None else self.stop
        if stops:
            req["stop"] = list(stops)
        if (fmt := kwargs.pop("response_format", None)) is not None:
            req["response_format"] = normalize_response_format(fmt)
        for key, value in kwargs.items():
            if key in PASSTHROUGH and value is not None:
                req[key] = value
        if req.get("top_logprobs") and not req.get("logprobs"):
            req["logprobs"] = True
        return req

    @contextlib.contextmanager
    def _slot(self, engine: _Engine) -> Iterator[dict[str, Any]]:
        """Hold a slot for one call; yields a dict the call fills with llama.cpp's
        `timings`, logged (tokens, the wait for the slot, the time in it) when it ends."""
        asked = time.monotonic()
        if not engine.slots.acquire(self.queue_timeout_s, came=ARRIVALS.came()):
            raise ProviderError(
                f"the local model had no free slot for {self.queue_timeout_s:g} s "
                "(local_queue_timeout_s; more at once: local_slots)"
            )
        got = time.monotonic()
        call: dict[str, Any] = {}
        try:
            yield call
        finally:
            engine.slots.release()
            timings = call.get("timings") or {}
            log.info(
                "local model call: %d prompt + %d generated tokens, %.2f s waiting for a "
                "slot, %.2f s in it",
                int(timings.get("prompt_n", 0)),
                int(timings.get("predicted_n", 0)),
                got - asked,
                time.monotonic() - got,
            )

    def _call_server(self, req: dict[str, Any]) -> dict[str, Any]:
        engine = self._engine()
        with self._slot(engine) as call:
            res = engine.server.handle_chat_completions(req)
            if isinstance(res, (str, bytes)):
                res = json.loads(res)
            if isinstance(res, dict):
                call["timings"] = res.get("timings")
        if not isinstance(res, dict):
            raise LlamaCppError(f"unexpected reply from llama.cpp: {type(res).__name__}")
        if err := res.get("error"):
            msg = err.get("message", err) if isinstance(err, dict) else err
            raise LlamaCppError(f"llama.cpp: {msg}")
        return res

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        res = self._call_server(self._request(messages, stop, dict(kwargs)))
        choice = res["choices"][0]
        text = content_text(choice["message"].get("content") or "")
        usage = res.get("usage") or {}
        info: dict[str, Any] = {
            "finish_reason": choice.get("finish_reason"),
            "model_name": os.path.basename(self.model_path),
        }
        if (logprobs := openai_logprobs(choice.get("logprobs"))) is not None:
            info["logprobs"] = logprobs
        if timings := res.get("timings"):
            info["timings"] = timings
        message = AIMessage(
            content=text,
            usage_metadata={
                "input_tokens": int(usage.get("prompt_tokens", 0)),
                "output_tokens": int(usage.get("completion_tokens", 0)),
                "total_tokens": int(usage.get("total_tokens", 0)),
            },
        )
        if run_manager and text:
            run_manager.on_llm_new_token(text)
        return ChatResult(
            generations=[ChatGeneration(message=message, generation_info=info)],
            llm_output={"token_usage": usage, "model_name": info["model_name"]},
        )

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # CPU-bound and serialised: keep it off the event loop (langgraph dev raises
        # BlockingError on blocking calls in async nodes).
        return await asyncio.to_thread(self._generate, messages, stop, None, **kwargs)

    # --- streaming: llama.cpp hands each token's chunk to a callback as it is made ---
    def _produce(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None,
        kwargs: dict[str, Any],
        emit: Callable[[Any], None],
    ) -> None:
        req = self._request(messages, stop, dict(kwargs))
        req["stream"] = True
        engine = self._engine()
        with self._slot(engine) as call:

            def relay(raw: Any) -> None:
                if isinstance(raw, (str, bytes)):
                    raw = json.loads(raw)
                if isinstance(raw, dict) and raw.get("timings"):  # the last chunk's
                    call["timings"] = raw["timings"]
                emit(raw)

            engine.server.handle_chat_completions(req, relay)

    @staticmethod
    def _chunk_of(raw: Any) -> ChatGenerationChunk | None:
        """One streamed OpenAI-format chunk as LangChain's; None for a chunk with no text."""
        if isinstance(raw, (str, bytes)):
            raw = json.loads(raw)
        if not isinstance(raw, dict):
            raise LlamaCppError(f"unexpected chunk from llama.cpp: {type(raw).__name__}")
        if err := raw.get("error"):
            msg = err.get("message", err) if isinstance(err, dict) else err
            raise LlamaCppError(f"llama.cpp: {msg}")
        choice = (raw.get("choices") or [{}])[0]
        text = content_text((choice.get("delta") or {}).get("content") or "")
        finish = choice.get("finish_reason")
        if not text and not finish:
            return None
        info = {"finish_reason": finish} if finish else None
        return ChatGenerationChunk(message=AIMessageChunk(content=text), generation_info=info)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        handoff: queue.Queue[tuple[str, Any]] = queue.Queue()

        def work() -> None:
            try:
                self._produce(messages, stop, kwargs, lambda raw: handoff.put(("chunk", raw)))
                handoff.put(("done", None))
            except BaseException as exc:
                handoff.put(("error", exc))

        run = contextvars.copy_context().run  # the graph run's context: its place in line
        threading.Thread(target=run, args=(work,), name="llama-stream", daemon=True).start()
        while True:
            kind, raw = handoff.get()
            if kind == "error":
                raise raw
            if kind == "done":
                return
            if (chunk := self._chunk_of(raw)) is not None:
                if run_manager and chunk.text:
                    run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        loop = asyncio.get_running_loop()
        handoff: asyncio.Queue[Any] = asyncio.Queue()

        def emit(raw: Any) -> None:
            loop.call_soon_threadsafe(handoff.put_nowait, raw)

        # CPU-bound and serialised: generation runs in a thread, chunks come back here
        work = asyncio.ensure_future(asyncio.to_thread(self._produce, messages, stop, kwargs, emit))
        while True:
            getter = asyncio.ensure_future(handoff.get())
            await asyncio.wait({getter, work}, return_when=asyncio.FIRST_COMPLETED)
            finished = not getter.done()
            if finished:  # generation ended: what it emitted is already queued
                getter.cancel()
                await work  # raises the engine's error, if any
                pending = [handoff.get_nowait() for _ in range(handoff.qsize())]
            else:
                pending = [getter.result()]
            for raw in pending:
                if (chunk := self._chunk_of(raw)) is not None:
                    if run_manager and chunk.text:
                        await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                    yield chunk
            if finished:
                return

    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        include_raw: bool = False,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """JSON-schema-constrained output (llama.cpp grammar), parsed like ChatOpenAI's."""
        if kwargs.pop("method", "json_schema") not in ("json_schema", "json_mode"):
            raise ValueError("LlamaCppChatModel supports method='json_schema' only")
        kwargs.pop("strict", None)
        if kwargs:
            raise ValueError(f"unsupported arguments: {sorted(kwargs)}")
        is_model = isinstance(schema, type) and issubclass(schema, BaseModel)
        llm = self.bind(
            response_format=normalize_response_format(schema),
            ls_structured_output_format={"kwargs": {"method": "json_schema"}, "schema": schema},
        )
        parser: Runnable[Any, Any] = (
            PydanticOutputParser(pydantic_object=schema)  # type: ignore[arg-type]
            if is_model
            else JsonOutputParser()
        )
        if not include_raw:
            return llm | parser

        def _parse(raw: Any) -> dict[str, Any]:
            try:
                return {"raw": raw, "parsed": parser.invoke(raw), "parsing_error": None}
            except Exception as exc:
                return {"raw": raw, "parsed": None, "parsing_error": exc}

        return llm | RunnableLambda(_parse)
