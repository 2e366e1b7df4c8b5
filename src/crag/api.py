"""The Python entry points: `ask`, `aask` and `astream` over the compiled graph.

Every provider a run's Context names is checked once, before the run starts
(`checked`), so that a misspelt grader, source, chat model or embeddings name is one
line naming the knob (and the environment variable it came from), not a failure deep
in a node; and each provider the run will use must be able to start (`check_ready`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Overwrite, StreamMode

from crag.aio import synchronous
from crag.context import DEFAULT_TENANT, ENV_PREFIX, Context
from crag.errors import ProviderError, StoreError
from crag.filelock import LockBusy, exclusive
from crag.grading.registry import GRADERS, WITH_MODEL, judge_spec
from crag.graph import Graph, build, compiled, graph
from crag.models.chat import CHAT_MODELS, EXTRACTIVE
from crag.models.embeddings import EMBEDDINGS, embeddings_ready
from crag.prompts import partial_answer
from crag.registry import Registry
from crag.retrieval.clients import check_home
from crag.retrieval.external import SOURCES, check_sources_ready, source_names
from crag.state import InputState, Passage, State, Step, clean_question, with_ratings


def make_context(context: Context | None = None, **overrides: Any) -> Context:
    """A Context from an existing one or the environment, with keyword overrides, whose
    providers can start."""
    base = context or Context()
    ctx = checked(base.with_overrides(**overrides) if overrides else base)
    check_ready(ctx)
    return ctx


StepCallback = Callable[[str, dict[str, Any]], None]
TokenCallback = Callable[[str], None]
THREADS_FILE = "threads.sqlite"
#: One lock file per thread in use: a thread answers one question at a time.
TURN_LOCKS = "thread-locks"


@contextlib.asynccontextmanager
async def thread_graph(
    ctx: Context, thread_id: str | None
) -> AsyncIterator[tuple[Graph, RunnableConfig]]:
    """The graph and its run config; on a thread, checkpointed in CRAG_HOME so that a
    conversation continues after a restart. Threads are the tenant's: another tenant's
    thread of the same id is another conversation."""
    if thread_id is None:
        yield graph, RunnableConfig()
        return
    check_home(ctx)  # a file there is not a missing library
    if not ctx.store.home.is_dir():
        raise StoreError(
            f"no library at {ctx.store.home}: run `crag ingest FOLDER --home {ctx.store.home}`"
        )
    key = thread_key(ctx, thread_id)
    async with (
        one_turn_at_a_time(ctx, key),
        AsyncSqliteSaver.from_conn_string(str(ctx.store.home / THREADS_FILE)) as saver,
    ):
        yield (
            compiled(build(), checkpointer=saver, name="crag"),
            {"configurable": {"thread_id": key}},
        )


@contextlib.asynccontextmanager
async def one_turn_at_a_time(ctx: Context, key: str) -> AsyncIterator[None]:
    """Hold the thread while a turn runs: a second question on it (in this process or
    another) waits for the first, instead of both starting from the same checkpoint and
    one turn being lost."""
    folder = ctx.store.home / TURN_LOCKS
    folder.mkdir(exist_ok=True)
    path = folder / hashlib.sha256(key.encode()).hexdigest()[:20]
    held = contextlib.ExitStack()
    while True:
        try:
            held.enter_context(exclusive(path, wait=False))
            break
        except LockBusy:
            await asyncio.sleep(0.05)
    with held:
        yield


def thread_key(ctx: Context, thread_id: str) -> str:
    """The checkpoint key of a tenant's thread (the default tenant's: the id itself)."""
    return thread_id if ctx.store.tenant == DEFAULT_TENANT else f"{ctx.store.tenant}/{thread_id}"


async def aask(
    question: str,
    *,
    context: Context | None = None,
    thread_id: str | None = None,
    on_step: StepCallback | None = None,
    on_token: TokenCallback | None = None,
    **overrides: Any,
) -> State:
    """Run the whole graph for one question; returns the final state.

    `thread_id` continues a conversation: a follow-up is read in the light of the
    earlier turns. `on_step(node, update)` is called as each node finishes;
    `on_token(text)` with each piece of the answer as the chat model writes it.
    """
    ctx = make_context(context, **overrides)
    question = clean_question(question, ctx.retrieval.max_question_chars)
    final: dict[str, Any] = {}
    written: dict[str, str] = {}  # per model call: the raw reply so far
    shown = ""
    modes: list[StreamMode] = ["values"]  # what is asked for only: each mode costs a copy
    if on_step is not None:
        modes.append("updates")
    if on_token is not None:
        modes.append("messages")
    async with thread_graph(ctx, thread_id) as (runner, config):
        async for mode, chunk in runner.astream(
            InputState(question=question), config, context=ctx, stream_mode=modes
        ):
            if mode == "values":
                final = cast(dict[str, Any], chunk)
            elif mode == "updates" and on_step is not None:
                for node, update in cast(dict[str, Any], chunk).items():
                    on_step(node, as_written(update))
            elif mode == "messages" and on_token is not None:
                message, meta = cast(tuple[Any, dict[str, Any]], chunk)
                if meta.get("langgraph_node") != "generate" or not message.text:
                    continue
                key = str(message.id)
                written[key] = written.get(key, "") + message.text
                text = partial_answer(written[key])
                if text.startswith(shown) and len(text) > len(shown):
                    on_token(text[len(shown) :])
                    shown = text
    return cast(State, final)


ask = synchronous(
    aask,
    "ask",
    """Synchronous `aask`, e.g. `ask("What is dropout?", k=8, external="none")`; works
    inside a running event loop too (a notebook).""",
)


#: What `summary` shows of each document: where it is from, and its confidence signals.
DOCUMENT_KEYS = (
    "source",
    "page",
    "url",
    "similarity",
    "score",
    "completeness",
    "recency",
    "authority",
    "confidence",
    "date",
    "dated_by",
    "kind",
)


def _document(doc: Passage) -> dict[str, Any]:
    return {key: doc[key] for key in DOCUMENT_KEYS if key in doc}  # type: ignore[literal-required]


def _timings(path: list[Step]) -> dict[str, float]:
    """Seconds per node, a node that ran more than once (grade, grade_part) summed."""
    total: dict[str, float] = {}
    for step in path:
        total[step["node"]] = round(total.get(step["node"], 0.0) + step["seconds"], 3)
    return total


def summary(state: State) -> dict[str, Any]:
    """The stable, JSON-ready view of a run (what `crag ask --json` prints)."""
    path = state.get("path") or []
    ratings = state.get("ratings") or {}
    return {
        "question": state.get("question", ""),
        "tenant": state.get("tenant") or DEFAULT_TENANT,
        "cached": bool(state.get("cached")),
        "verdict": state.get("verdict"),
        "grader": state.get("grader"),
        "route": state.get("route"),
        "parts": state.get("parts") or [],
        "missing_terms": state.get("missing_terms") or [],
        "scores": state.get("scores") or [],
        "documents": [_document(doc) for doc in with_ratings(state.get("docs") or [], ratings)],
        "web_documents": [
            _document(doc) for doc in with_ratings(state.get("web_docs") or [], ratings)
        ],
        "web_query": state.get("web_query") or None,
        "web_error": state.get("web_error") or None,
        "searched": state.get("searched") or [],
        "redacted": state.get("redacted") or [],
        "kept_strips": len(state.get("kept_strips") or []),
        "answer": state.get("answer", ""),
        "answered": bool(state.get("answered")),
        "decline_reason": state.get("decline_reason"),
        "support": state.get("support") or "none",
        "unsupported": state.get("unsupported") or [],
        "confidence": state.get("confidence", 0.0),
        "composite": state.get("composite", 0.0),
        "conflicts": state.get("conflicts") or [],
        "citations": state.get("citations") or [],
        "path": [step["node"] for step in path],
        "timings": _timings(path),
    }


async def astream(
    question: str, *, context: Context | None = None, **overrides: Any
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """Yield (node name, state update) as each node finishes."""
    ctx = make_context(context, **overrides)
    async for chunk in graph.astream(
        InputState(question=clean_question(question, ctx.retrieval.max_question_chars)),
        context=ctx,
        stream_mode="updates",
    ):
        for node, update in chunk.items():
            yield node, as_written(update)


def as_written(update: dict[str, Any] | None) -> dict[str, Any]:
    """A node's update as the state reads after it: a key reset with `Overwrite` (a
    run's start) is the value it was reset to, not the wrapper."""
    return {k: v.value if isinstance(v, Overwrite) else v for k, v in (update or {}).items()}


#: Knobs that name a provider, and the registry that knows the names.
PROVIDER_FIELDS: dict[str, Registry[Any]] = {
    "grader": GRADERS,
    "external": SOURCES,
    "chat_model": CHAT_MODELS,
    "judge_model": CHAT_MODELS,
    "embeddings": EMBEDDINGS,
}


def checked(ctx: Context) -> Context:
    """`ctx`, once every provider it names exists: a misspelt name fails before the run,
    naming the field (and the environment variable, if the value came from there)."""
    for field, registry in PROVIDER_FIELDS.items():
        value = ctx.get(field)
        if value is None or (value == EXTRACTIVE and registry is CHAT_MODELS):
            continue
        if str(value).partition(":")[0] not in registry:
            env = ENV_PREFIX + field.upper()
            origin = f" (from {env})" if os.environ.get(env) == value else ""
            names = [*registry.names(), *([EXTRACTIVE] if field == "chat_model" else [])]
            raise ValueError(
                f"{field}={value!r}{origin}: unknown {registry.kind}; use {', '.join(names)}"
            )
    try:
        source_names(ctx)
    except ProviderError as exc:
        raise ValueError(str(exc)) from None
    return ctx


def check_ready(ctx: Context) -> None:
    """Raise ProviderError if a provider the run will use cannot start here (a key not
    in the environment, an optional package not installed): before the first question,
    not when a node first needs it."""
    base, _, model = ctx.grading.grader.partition(":")
    if base in WITH_MODEL and not model:
        raise ProviderError(f"grader={base} needs a model: {base}:<hub name or path>")
    GRADERS.check_ready(base)
    embeddings_ready(ctx)
    specs = {ctx.models.chat_model, judge_spec(ctx) or EXTRACTIVE}
    if ctx.generation.checks_claims and ctx.models.chat_model != EXTRACTIVE:
        specs.add(ctx.models.judge)  # checks a model's answer
    for spec in specs - {EXTRACTIVE}:
        CHAT_MODELS.check_ready(spec.partition(":")[0])
    check_sources_ready(ctx)
