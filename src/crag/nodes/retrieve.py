"""retrieve: the k library chunks nearest to the question."""

from __future__ import annotations

import asyncio

from crag.context import Context
from crag.providers.search import hit_to_passage
from crag.state import State
from crag.trail import NodeResult, recorded

# A new question on an existing thread must not inherit the last run's results.
FRESH_RUN = {
    "good_docs": [],
    "web_query": "",
    "web_docs": [],
    "web_error": "",
    "strips": [],
    "kept_strips": [],
    "answer": "",
    "citations": [],
}


@recorded("retrieve")
async def retrieve(state: State, ctx: Context) -> NodeResult:
    from crag.store import retrieve as store_retrieve

    hits = await asyncio.to_thread(store_retrieve, ctx, ctx.collection, state["question"], ctx.k)
    docs = [hit_to_passage(hit, origin="library") for hit in hits]
    return {**FRESH_RUN, "docs": docs}, f"{len(docs)} chunks from {ctx.collection!r}"
