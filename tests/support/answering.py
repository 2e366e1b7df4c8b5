"""The answer steps run as the graph runs them: generate's draft, then verify."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from crag.context import Context
from crag.nodes.generate import generate
from crag.nodes.verify import verify
from crag.state import State

#: The nodes a library question answered on the correct path runs, in order.
CORRECT_PATH = [
    "condense",
    "cache_lookup",
    "split",
    "retrieve",
    "grade",
    "refine",
    "generate",
    "verify",
]


async def answer_of(state: State, *, runtime: Runtime[Context]) -> dict[str, Any]:
    """generate, then verify on the state generate left: both updates, the path of both."""
    drafted = await generate(state, runtime=runtime)
    checked = await verify({**state, **drafted}, runtime=runtime)  # type: ignore[typeddict-item]
    return {**drafted, **checked, "path": [*drafted["path"], *checked["path"]]}
