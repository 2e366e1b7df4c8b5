"""retrieve: the library chunks nearest to the question (`candidates` of them, which
grade scores and cuts to the best k), and, for a question of several parts, the `k`
nearest to each part, which grade pools with the best of the question's."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from crag.context import Context
from crag.nodes.split import split_of
from crag.nodes.trail import context_of, note, recorded
from crag.retrieval.library import hit_to_passage
from crag.retrieval.library import retrieve as library_retrieve
from crag.retrieval.library_index import without_boilerplate
from crag.state import Passage, State


async def nearest(ctx: Context, text: str, depth: int) -> list[Passage]:
    """The library chunks nearest to `text`, as passages."""
    hits = await asyncio.to_thread(library_retrieve, ctx, ctx.store.collection, text, depth)
    return [hit_to_passage(hit, origin="library") for hit in hits]


@recorded
async def retrieve(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    depth = max(ctx.retrieval.k, ctx.retrieval.candidates)  # all scored; grade keeps the best k
    found = await nearest(ctx, state["question"], depth)
    docs, dropped = await asyncio.to_thread(without_boilerplate, ctx, ctx.store.collection, found)
    detail = f"{len(docs)} chunks from {ctx.store.collection!r}"
    if dropped:
        detail += f" ({dropped} of boilerplate only dropped)"
    parts = split_of(state).parts
    by_part: list[Passage] = []
    if len(parts) >= 2:  # each part graded on its own, with chunks of its own
        for part in parts:
            by_part += await nearest(ctx, part, ctx.retrieval.k)
        detail += f"; {len(by_part)} more for its {len(parts)} parts"
    return {"retrieved": docs, "part_retrieved": by_part, **note(detail)}
