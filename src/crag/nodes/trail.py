"""What every node shares: the run's Context, and the audit trail of the path taken."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from langgraph.runtime import Runtime

from crag.context import Context, context_from
from crag.state import State, Step


class Node(Protocol):
    """A graph node as LangGraph calls it: the state, and the runtime by keyword."""

    def __call__(self, state: State, *, runtime: Runtime[Context]) -> Awaitable[dict[str, Any]]: ...


NodeBody = Callable[[State, Runtime[Context]], Awaitable[dict[str, Any]]]


def context_of(runtime: Runtime[Context] | None) -> Context:
    """The run's Context; a default one (env-configured) when the caller gave none."""
    return context_from(getattr(runtime, "context", None))


def note(detail: str) -> dict[str, list[Step]]:
    """A node's line in the path; `recorded` stamps it with the node's name and time."""
    return {"path": [{"node": "", "seconds": 0.0, "detail": detail}]}


def recorded(fn: NodeBody) -> Node:
    """Time a node and record (name, seconds, detail) in the state's path."""

    async def node(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        start = time.perf_counter()
        update = await fn(state, runtime)
        detail = (update.get("path") or [{"detail": ""}])[0]["detail"]
        step: Step = {
            "node": fn.__name__,
            "seconds": round(time.perf_counter() - start, 3),
            "detail": detail,
        }
        return {**update, "path": [step]}

    # Not functools.wraps: __wrapped__ would make LangGraph read the inner signature.
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(node, attr, getattr(fn, attr))
    return node
