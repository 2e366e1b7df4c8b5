"""retrieve: the k library chunks nearest to the question."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from crag.context import Context
from crag.nodes.trail import context_of, note, recorded
from crag.retrieval.library import hit_to_passage
from crag.retrieval.library import retrieve as library_retrieve
from crag.state import State, clean_question

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
    "unsupported": [],
}


@recorded
async def retrieve(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    # bounded work on any input, also for callers that skip the API (langgraph dev)
    question = clean_question(state.get("question"), ctx.max_question_chars)
    hits = await asyncio.to_thread(library_retrieve, ctx, ctx.collection, question, ctx.k)
    docs = [hit_to_passage(hit, origin="library") for hit in hits]
    return {**FRESH_RUN, "docs": docs, **note(f"{len(docs)} chunks from {ctx.collection!r}")}
