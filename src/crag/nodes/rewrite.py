"""rewrite: turn the question into a short search query for the external source.

The question itself is never replaced: generate still answers `question`.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from crag import prompts
from crag.context import Context
from crag.grading.queries import with_constraints
from crag.models.chat import EXTRACTIVE, make_chat_model
from crag.nodes.trail import context_of, note, recorded
from crag.redact import redact, without_masked
from crag.state import State
from crag.text import keyword_query

log = logging.getLogger(__name__)


def clean_query(raw: str) -> str:
    """First line of the model's reply, without quotes or a 'Query:' label."""
    line = raw.strip().splitlines()[0] if raw.strip() else ""
    if ":" in line[:20]:
        line = line.split(":", 1)[1]
    return line.strip().strip("\"'` ").rstrip(".")


@recorded
async def rewrite(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    # the query leaves the machine: it is written from the question without its secrets
    outgoing = redact(state["question"]) if ctx.redact_queries else None
    question = outgoing.text if outgoing else state["question"]
    masked = outgoing.removed if outgoing else []

    def sendable(text: str) -> str:  # less the words of a masked secret ("jane.doe")
        return without_masked(text, state["question"]) if outgoing else text

    gaps = [g for g in state.get("missing_terms") or [] if sendable(g)]
    # Of a decomposed question, only the parts the library does not cover are searched.
    open_parts = [p["text"] for p in state.get("parts") or [] if not p["covered"]]
    if open_parts:
        searched = sendable(" ".join(open_parts))
        question = with_constraints(searched, question, names=False)
    # What the library lacks leads the query: the web is there to fill that gap.
    fallback = with_constraints(keyword_query(" ".join([*gaps, question])), question)
    if ctx.chat_model == EXTRACTIVE:
        return {"web_query": fallback, "redacted": masked, **note(f"keywords: {fallback}")}
    model = make_chat_model(ctx.chat_model, ctx, max_tokens=24)
    try:
        reply = await model.ainvoke(
            [
                SystemMessage(prompts.REWRITE_SYSTEM),
                HumanMessage(
                    prompts.REWRITE_GAP_USER.format(question=question, gaps=", ".join(gaps))
                    if gaps
                    else prompts.REWRITE_USER.format(question=question)
                ),
            ]
        )
        query = clean_query(str(reply.content))
    except Exception as exc:  # a rewrite is an optimisation: never fail the run on it
        log.warning("rewrite failed (%s); using keywords", exc)
        query = ""
    if not 2 <= len(query) <= 200:
        detail = f"keywords (model gave no usable query): {fallback}"
        return {"web_query": fallback, "redacted": masked, **note(detail)}
    query = with_constraints(query, question)
    return {"web_query": query, "redacted": masked, **note(f"query: {query}")}
