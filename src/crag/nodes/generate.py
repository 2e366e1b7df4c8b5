"""generate: a draft answer from the refined context only, with [n] citations.

The chat model (or, with none, the best kept strips quoted) writes the draft; the
`verify` step decides whether it stands. With no refined context left there is no
draft, and no model runs: crag will say so instead of guessing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from crag import prompts
from crag.context import Context
from crag.grading.constraints import Constraint, check
from crag.models.chat import EXTRACTIVE, make_chat_model
from crag.nodes.citations import CITE, number_sources, render_sources
from crag.nodes.trail import context_of, note, recorded
from crag.nodes.verify import asked_of
from crag.state import Citation, Draft, State, Strip, documents_seen
from crag.text import brief, sentence_key, split_sentences

log = logging.getLogger(__name__)

FALLBACK = "extractive fallback: "

_Pick = tuple[float, int, int, str]  # score, position, citation number, text


def extractive_answer(
    numbered: list[tuple[Citation, list[Strip]]],
    limit: int = 3,
    asked: Sequence[Constraint] = (),
) -> str:
    """No LLM: the most confident kept strips, each with its citation.

    Each source's best strip comes first, so a partial answer shows both halves; then
    the strips that meet more of the question's years, dates and versions (of `asked`),
    whichever their source: the changelog of version 3 before the rest of the handbook
    of version 2.
    """
    by_origin: dict[str, list[_Pick]] = {}
    for c, strips in numbered:
        for s in strips:
            by_origin.setdefault(c["origin"], []).append(
                (s.get("confidence", s["score"]), s["position"], c["n"], s["text"])
            )
    # years, dates and versions must be in the strips quoted; names only somewhere in
    # the context (`check`), and a name all sources repeat (the product) ranks nothing
    dated = [c for c in asked if c.kind != "name"]
    met = {t[3]: len(check(dated, [t[3]]).met) for picks in by_origin.values() for t in picks}

    def rank(pick: _Pick) -> tuple[int, float]:
        return -met[pick[3]], -pick[0]

    queues = [sorted(items, key=rank) for items in by_origin.values()]
    firsts = sorted((queue.pop(0) for queue in queues if queue), key=rank)
    rest = sorted([*firsts[limit:], *(t for queue in queues for t in queue)], key=rank)
    # a sentence is quoted once: search snippets and overlapping strips repeat them
    said: set[str] = set()
    picked: list[_Pick] = []
    for score, at, n, text in [*firsts[:limit], *rest]:
        if len(picked) == limit:
            break
        if new := [x for x in split_sentences(text) if sentence_key(x) not in said]:
            said.update(sentence_key(x) for x in new)
            picked.append((score, at, n, " ".join(new)))
    return " ".join(f"{text} [{n}]" for _, _, n, text in sorted(picked, key=lambda t: t[1]))


# a sentence's end, with the citations that follow it ("... errors. [1], [2]")
_SENTENCE_DONE = re.compile(r"[.!?](?:[\s,]*\[\d+\])*(?=\s|$)")


def finished_sentences(raw: str, sources: int) -> str:
    """The answer of a reply whose JSON cannot be read, as far as its sentences were
    finished: a small model that starts to loop (citing [6] [7] ..., or writing a
    sentence again and again, until the token limit) has usually written its answer
    first. The answer stops where a sentence comes again, and citations of sources that
    do not exist are dropped; "" when no sentence was finished."""
    text = prompts.partial_answer(raw)
    text = CITE.sub(lambda m: m[0] if 1 <= int(m[1]) <= sources else "", text)
    kept: list[str] = []
    seen: set[str] = set()
    start = 0
    for end in _SENTENCE_DONE.finditer(text):
        sentence, start = text[start : end.end()].strip(" ,"), end.end()
        key = sentence_key(CITE.sub("", sentence))
        if key in seen:  # written again: the loop has begun
            break
        seen.add(key)
        kept.append(sentence)
    # a citation given again at once ("[4] [4] [4]") is given once
    return re.sub(r"(\[\d+\])(?:[\s,]*\1(?!\d))+", r"\1", " ".join(" ".join(kept).split()))


async def draft(
    question: str, numbered: list[tuple[Citation, list[Strip]]], ctx: Context
) -> tuple[str | None, str]:
    """The chat model's answer (None when it finds none in the sources), and a note.

    A reply that is not the JSON asked for, or a model that fails, gives the reply's
    finished sentences if it wrote some (a reply cut at the token limit), else the best
    passages, said so in the answer: the run still answers from its sources.
    """
    model = make_chat_model(ctx.models.chat_model, ctx, max_tokens=ctx.models.max_answer_tokens)
    tag = prompts.data_tag()
    messages = [
        SystemMessage(prompts.ANSWER_SYSTEM.format(tag=tag)),
        HumanMessage(
            prompts.ANSWER_USER.format(sources=render_sources(numbered, tag), question=question)
        ),
    ]

    def fallback(why: str, detail: str, raw: str = "") -> tuple[str, str]:
        if text := finished_sentences(raw, len(numbered)):
            return text, f"{len(numbered)} sources; the reply's finished sentences ({detail})"
        return f"({why}; best passages shown.) " + extractive_answer(numbered), FALLBACK + detail

    try:
        reply = await model.with_structured_output(prompts.Reply, include_raw=True).ainvoke(
            messages
        )
    except ValueError as exc:  # a client that parses the JSON itself (pydantic) and raises
        log.warning("chat model reply is not the JSON asked for: %s", brief(exc))
        return fallback("The language model's reply could not be read", "unreadable reply")
    except Exception as exc:  # timeout, HTTP error, context overflow: still answer
        name = type(exc).__name__
        log.warning(
            "chat model failed (%s: %s); answering with the best passages", name, brief(exc)
        )
        # an OpenAI client raises on a reply cut at the token limit, and keeps the reply
        cut = getattr(getattr(exc, "completion", None), "choices", None) or [None]
        raw = str(getattr(getattr(cut[0], "message", None), "content", "") or "")
        return fallback(f"The language model failed: {name}", f"model failed ({name})", raw)
    parsed = reply.get("parsed") if isinstance(reply, dict) else None
    if not isinstance(parsed, prompts.Reply):
        message = reply.get("raw") if isinstance(reply, dict) else None
        content = str(getattr(message, "content", "") or "")
        log.warning("chat model reply is not the JSON asked for: %r", brief(content))
        return fallback("The language model's reply could not be read", "unreadable reply", content)
    if not parsed.found or not parsed.answer.strip():
        return None, "model found no answer"
    return parsed.answer.strip(), f"{len(numbered)} sources"


@recorded
async def generate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    kept = state.get("kept_strips") or []
    if not kept:
        return {"draft": None, **note("no supporting source: nothing to answer from")}
    numbered = number_sources(kept, documents_seen(state))
    if ctx.models.chat_model == EXTRACTIVE:
        asked = asked_of(state) if ctx.generation.verify else []
        text, detail, by_model = extractive_answer(numbered, asked=asked), "extractive", False
    else:
        drafted, detail = await draft(state["question"], numbered, ctx)
        text, by_model = drafted or "", True
    made = Draft(text=text, detail=detail, by_model=by_model, fallback=detail.startswith(FALLBACK))
    return {"draft": made, **note(detail)}
