"""What every node shares: the run's Context and the audit trail of the path taken."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from langgraph.runtime import Runtime

from crag.context import Context
from crag.state import State, Step

NodeResult = tuple[dict[str, Any], str]


class Node(Protocol):
    """A graph node as LangGraph calls it: the state, and the runtime by keyword."""

    def __call__(self, state: State, *, runtime: Runtime[Context]) -> Awaitable[dict[str, Any]]: ...


def context_of(runtime: Runtime[Context] | None) -> Context:
    """The run's Context; a default one (env-configured) when the caller gave none."""
    ctx = getattr(runtime, "context", None)
    if ctx is None:
        return Context()
    if isinstance(ctx, dict):
        return Context(**ctx)
    return ctx


def recorded(name: str) -> Callable[[Callable[..., Awaitable[NodeResult]]], Node]:
    """Time a node and append (name, seconds, detail) to the state's path."""

    def wrap(fn: Callable[..., Awaitable[NodeResult]]) -> Node:
        async def node(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
            start = time.perf_counter()
            update, detail = await fn(state, context_of(runtime))
            step: Step = {
                "node": name,
                "seconds": round(time.perf_counter() - start, 3),
                "detail": detail,
            }
            return {**update, "path": [step]}

        # Not functools.wraps: LangGraph reads the signature to inject `runtime`, and
        # __wrapped__ would show it the inner (state, ctx) signature instead.
        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(node, attr, getattr(fn, attr))
        return node

    return wrap
