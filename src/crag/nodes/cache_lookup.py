"""cache_lookup: the tenant's cached answer to the question, if an earlier run gave a
confident, verified one. A hit replays that run's verdict and answer and goes to the
end; a miss goes on to the question's split and retrieval."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from crag import cache
from crag.context import Context
from crag.nodes.trail import context_of, note, recorded
from crag.state import State


@recorded
async def cache_lookup(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    if not ctx.cache.enabled:
        return {"cached": False, **note("the answer cache is off")}
    hit = await asyncio.to_thread(cache.lookup, ctx, state["question"])
    if hit is None:
        return {"cached": False, **note("no cached answer")}
    about = {"question": state["question"], "cached": True}
    return {
        **{key: hit.result[key] for key in cache.KEPT if key in hit.result},
        "cached": True,
        "decline_reason": None,
        # the conversation keeps the reply, and the standalone question it answered
        "messages": [AIMessage(hit.result.get("answer", ""), response_metadata=about)],
        **note(f"cached answer (similarity {hit.similarity:.2f} to {hit.question!r})"),
    }


def after_lookup(state: State) -> Literal["split", "__end__"]:
    """A cached answer ends the run; any other question goes on."""
    return "__end__" if state.get("cached") else "split"  # END
