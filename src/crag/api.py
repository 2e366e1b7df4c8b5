"""The Python entry points: `ask`, `aask` and `astream` over the compiled graph."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

from crag.context import Context
from crag.graph import checked, graph
from crag.state import InputState, State, clean_question


def make_context(context: Context | None = None, **overrides: Any) -> Context:
    """A Context from an existing one or the environment, with keyword overrides."""
    base = context or Context()
    return checked(base.with_overrides(**overrides) if overrides else base)


StepCallback = Callable[[str, dict[str, Any]], None]


async def aask(
    question: str,
    *,
    context: Context | None = None,
    on_step: StepCallback | None = None,
    **overrides: Any,
) -> State:
    """Run the whole graph for one question; returns the final state.

    `on_step(node, update)` is called as each node finishes (progress display).
    """
    ctx = make_context(context, **overrides)
    question = clean_question(question, ctx.max_question_chars)
    final: dict[str, Any] = {}
    async for mode, chunk in graph.astream(
        InputState(question=question), context=ctx, stream_mode=["updates", "values"]
    ):
        if mode == "values":
            final = cast(dict[str, Any], chunk)
        elif on_step is not None:
            for node, update in cast(dict[str, Any], chunk).items():
                on_step(node, update or {})
    return cast(State, final)


def ask(
    question: str,
    *,
    context: Context | None = None,
    on_step: StepCallback | None = None,
    **overrides: Any,
) -> State:
    """Synchronous `aask`, e.g. `ask("What is dropout?", k=8, external="none")`."""
    return asyncio.run(aask(question, context=context, on_step=on_step, **overrides))


def summary(state: State) -> dict[str, Any]:
    """The stable, JSON-ready view of a run (what `crag ask --json` prints)."""
    path = state.get("path") or []
    return {
        "question": state.get("question", ""),
        "verdict": state.get("verdict"),
        "grader": state.get("grader"),
        "missing_terms": state.get("missing_terms") or [],
        "scores": state.get("scores") or [],
        "documents": [
            {
                key: doc[key]  # type: ignore[literal-required,unused-ignore]
                for key in ("source", "page", "similarity", "score")
                if key in doc
            }
            for doc in state.get("docs") or []
        ],
        "web_query": state.get("web_query") or None,
        "web_error": state.get("web_error") or None,
        "kept_strips": len(state.get("kept_strips") or []),
        "answer": state.get("answer", ""),
        "answered": bool(state.get("answered")),
        "support": state.get("support") or "none",
        "unsupported": state.get("unsupported") or [],
        "citations": state.get("citations") or [],
        "path": [step["node"] for step in path],
        "timings": {step["node"]: step["seconds"] for step in path},
    }


async def astream(
    question: str, *, context: Context | None = None, **overrides: Any
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """Yield (node name, state update) as each node finishes."""
    ctx = make_context(context, **overrides)
    async for chunk in graph.astream(
        InputState(question=clean_question(question, ctx.max_question_chars)),
        context=ctx,
        stream_mode="updates",
    ):
        for node, update in chunk.items():
            yield node, update or {}
