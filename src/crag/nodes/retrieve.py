"""retrieve: the library chunks nearest to the question (`candidates` of them, which
grade scores and cuts to the best k)."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from crag.context import Context
from crag.nodes.trail import context_of, note, recorded
from crag.retrieval.library import hit_to_passage
from crag.retrieval.library import retrieve as library_retrieve
from crag.retrieval.library_index import without_boilerplate
from crag.state import State


@recorded
async def retrieve(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    depth = max(ctx.retrieval.k, ctx.retrieval.candidates)  # all scored; grade keeps the best k
    hits = await asyncio.to_thread(
        library_retrieve, ctx, ctx.store.collection, state["question"], depth
    )
    docs, dropped = await asyncio.to_thread(
        without_boilerplate,
        ctx,
        ctx.store.collection,
        [hit_to_passage(hit, origin="library") for hit in hits],
    )
    found = f"{len(docs)} chunks from {ctx.store.collection!r}"
    if dropped:
        found += f" ({dropped} of boilerplate only dropped)"
    return {"retrieved": docs, **note(found)}
