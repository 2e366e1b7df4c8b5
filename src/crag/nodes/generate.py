"""generate: answer from the refined context only, with [n] citations.

With no refined context left, crag says so instead of guessing, and no model runs.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from crag import prompts
from crag.context import Context
from crag.models.chat import EXTRACTIVE, make_chat_model
from crag.nodes.trail import context_of, note, recorded
from crag.state import Citation, Passage, State, Strip

log = logging.getLogger(__name__)

_CITE = re.compile(r"\[(\d+)\]")


def number_sources(kept: list[Strip], docs: list[Passage]) -> list[tuple[Citation, list[Strip]]]:
    """Group kept strips by what a reader would cite (file + page, or URL), numbered
    [1], [2], ... in reading order, so two chunks of one page share one number."""
    by_id = {d["id"]: d for d in docs}
    groups: dict[tuple[str, ...], tuple[Citation, list[Strip]]] = {}
    for strip in kept:
        doc = by_id[strip["doc_id"]]
        key = (doc["origin"], doc["source"], doc.get("page", ""), doc.get("url", ""))
        if key not in groups:
            citation: Citation = {
                "n": len(groups) + 1,
                "origin": doc["origin"],
                "source": doc["source"],
            }
            for field in ("page", "url", "title"):
                if doc.get(field):
                    citation[field] = doc[field]  # type: ignore[literal-required,unused-ignore]
            groups[key] = (citation, [])
        groups[key][1].append(strip)
    return list(groups.values())


def label(citation: Citation) -> str:
    if citation.get("url"):
        return f"{citation.get('title') or citation['source']} ({citation['url']})"
    if citation.get("page"):
        return f"{citation['source']}, page {citation['page']}"
    return citation["source"]


def render_sources(numbered: list[tuple[Citation, list[Strip]]]) -> str:
    blocks = [
        prompts.SOURCE_BLOCK.format(
            n=c["n"],
            label=label(c),
            origin=c["origin"],
            text=" ... ".join(s["text"] for s in strips),
        )
        for c, strips in numbered
    ]
    return "\n\n".join(blocks)


_Pick = tuple[float, int, int, str]  # score, position, citation number, text


def extractive_answer(numbered: list[tuple[Citation, list[Strip]]], limit: int = 3) -> str:
    """No LLM: the best-scoring kept strips, each with its citation.

    Library and web strips take turns, so a partial answer shows both halves.
    """
    by_origin: dict[str, list[_Pick]] = {}
    for c, strips in numbered:
        for s in strips:
            by_origin.setdefault(c["origin"], []).append(
                (s["score"], s["position"], c["n"], s["text"])
            )
    queues = [sorted(items, key=lambda t: -t[0]) for items in by_origin.values()]
    picked: list[_Pick] = []
    while len(picked) < limit and any(queues):
        for queue in queues:
            if queue and len(picked) < limit:
                picked.append(queue.pop(0))
    return " ".join(f"{text} [{n}]" for _, _, n, text in sorted(picked, key=lambda t: t[1]))


def cited(answer: str, numbered: list[tuple[Citation, list[Strip]]]) -> list[Citation]:
    """The citations the answer refers to; all sources if it cites none."""
    used = {int(m) for m in _CITE.findall(answer)}
    citations = [c for c, _ in numbered]
    return [c for c in citations if c["n"] in used] or citations


def is_refusal(answer: str) -> bool:
    low = answer.lower()
    return not low.strip() or "could not find" in low or "cannot find" in low


@recorded
async def generate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    kept = state.get("kept_strips") or []
    docs = [*(state.get("docs") or []), *(state.get("web_docs") or [])]
    if not kept:
        answer = prompts.NOT_FOUND
        if state.get("web_error"):
            answer += f" (The external source failed: {state['web_error']})"
        return {"answer": answer, "citations": [], **note("no supporting source: declined")}
    numbered = number_sources(kept, docs)
    if ctx.chat_model == EXTRACTIVE:
        answer = extractive_answer(numbered)
        return {"answer": answer, "citations": cited(answer, numbered), **note("extractive")}
    model = make_chat_model(ctx.chat_model, ctx, max_tokens=ctx.max_answer_tokens)
    try:
        reply = await model.ainvoke(
            [
                SystemMessage(prompts.ANSWER_SYSTEM),
                HumanMessage(
                    prompts.ANSWER_USER.format(
                        sources=render_sources(numbered), question=state["question"]
                    )
                ),
            ]
        )
    except Exception as exc:  # timeout, HTTP error, context overflow: still answer
        log.warning("chat model failed (%s); answering with the best passages", exc)
        answer = extractive_answer(numbered)
        warning = f"(The language model failed: {type(exc).__name__}; best passages shown.) "
        return {
            "answer": warning + answer,
            "citations": cited(answer, numbered),
            **note(f"model failed ({type(exc).__name__}): extractive fallback"),
        }
    answer = str(reply.content).strip()
    if is_refusal(answer):
        return {"answer": prompts.NOT_FOUND, "citations": [], **note("model found no answer")}
    return {
        "answer": answer,
        "citations": cited(answer, numbered),
        **note(f"{len(numbered)} sources"),
    }
