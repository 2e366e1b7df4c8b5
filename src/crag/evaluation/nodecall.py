"""Run crag's graph nodes one at a time, outside the graph.

The baselines and the tuner are made of crag's own nodes (retrieve, rewrite,
web_search, generate), called directly, so that they differ from crag only in the
steps they leave out, not in a second copy of the steps they share.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from crag.context import Context
from crag.state import State, Step
from crag.trail import Node


async def call_node(node: Node, state: State, ctx: Context) -> dict[str, Any]:
    """The node's state update, as the graph would receive it (with its path step)."""
    return await node(state, runtime=Runtime(context=ctx))


def apply(state: State, update: dict[str, Any]) -> State:
    """Merge an update into a state; path steps accumulate as in the graph."""
    merged: dict[str, Any] = {**state, **update}
    merged["path"] = [*(state.get("path") or []), *(update.get("path") or [])]
    return merged  # type: ignore[return-value]


def step(node: str, seconds: float, detail: str) -> Step:
    return {"node": node, "seconds": round(seconds, 3), "detail": detail}
