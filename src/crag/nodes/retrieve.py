"""retrieve: the library chunks nearest to the question (`candidates` of them, which
grade scores and cuts to the best k), or the tenant's cached answer to it (`served`:
grade passes its verdict on, and generate its answer)."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from crag import cache
from crag.context import Context
from crag.nodes.followup import standalone
from crag.nodes.trail import context_of, note, recorded
from crag.retrieval.library import hit_to_passage
from crag.retrieval.library import retrieve as library_retrieve
from crag.retrieval.library_index import without_boilerplate
from crag.state import State, clean_question, fresh_run


@recorded
async def retrieve(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    messages = list(state.get("messages") or [])
    said: list[HumanMessage] = []
    if messages and isinstance(messages[-1], HumanMessage):
        asked: Any = messages.pop().text  # a chat client sends the question as a message
    else:
        asked = state.get("question")
        said = [HumanMessage(str(asked))]
    # bounded work on any input, also for callers that skip the API (langgraph dev)
    asked = clean_question(asked, ctx.retrieval.max_question_chars)
    question, reading = await standalone(asked, messages, ctx)
    hit = await asyncio.to_thread(cache.lookup, ctx, question)
    if hit is not None:
        return from_cache(hit, question, said, reading, ctx)
    depth = max(ctx.retrieval.k, ctx.retrieval.candidates)  # all scored; grade keeps the best k
    hits = await asyncio.to_thread(library_retrieve, ctx, ctx.store.collection, question, depth)
    docs, dropped = await asyncio.to_thread(
        without_boilerplate,
        ctx,
        ctx.store.collection,
        [hit_to_passage(hit, origin="library") for hit in hits],
    )
    found = f"{len(docs)} chunks from {ctx.store.collection!r}"
    if dropped:
        found += f" ({dropped} of boilerplate only dropped)"
    detail = "; ".join(filter(None, [reading, found]))
    return {
        **fresh_run(),
        "tenant": ctx.store.tenant,
        "question": question,
        "messages": said,
        "retrieved": docs,
        **note(detail),
    }


def from_cache(
    hit: cache.Hit, question: str, said: list[HumanMessage], reading: str, ctx: Context
) -> dict[str, Any]:
    """The tenant's cached answer to the question: nothing is retrieved, and the nodes
    that own the result's keys pass it on."""
    detail = f"cached answer (similarity {hit.similarity:.2f} to {hit.question!r})"
    return {
        **fresh_run(),
        "tenant": ctx.store.tenant,
        "cached": True,
        "served": hit.result,
        "question": question,
        "messages": said,
        "retrieved": [],
        **note("; ".join(filter(None, [reading, detail]))),
    }
