"""The Python entry points: `ask`, `aask` and `astream` over the compiled graph."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

from crag.context import Context
from crag.state import InputState, State


def make_context(context: Context | None = None, **overrides: Any) -> Context:
    """A Context from an existing one or the environment, with keyword overrides."""
    base = context or Context()
    return base.with_overrides(**overrides) if overrides else base


async def aask(question: str, *, context: Context | None = None, **overrides: Any) -> State:
    """Run the whole graph for one question; returns the final state."""
    from crag.graph import graph

    question = question.strip()
    if not question:
        raise ValueError("the question is empty")
    ctx = make_context(context, **overrides)
    result = await graph.ainvoke(InputState(question=question), context=ctx)
    return cast(State, result)


def ask(question: str, *, context: Context | None = None, **overrides: Any) -> State:
    """Synchronous `aask`, e.g. `ask("What is dropout?", k=8, external="none")`."""
    return asyncio.run(aask(question, context=context, **overrides))


async def astream(
    question: str, *, context: Context | None = None, **overrides: Any
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """Yield (node name, state update) as each node finishes."""
    from crag.graph import graph

    ctx = make_context(context, **overrides)
    async for chunk in graph.astream(
        InputState(question=question.strip()), context=ctx, stream_mode="updates"
    ):
        for node, update in chunk.items():
            yield node, update or {}
