"""generate: answer from the refined context only, with [n] citations, then verify.

With no refined context left, crag says so instead of guessing, and no model runs.
The chat model (or, with none, the best kept strips quoted) writes a draft; the
verification step (`crag.nodes.verification`) decides whether it stands.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from crag import cache, prompts
from crag.context import Context
from crag.grading.conflicts import disagreement
from crag.grading.constraints import Constraint, check, constraints, named, subjects
from crag.grading.outcome import probability, signals
from crag.models.chat import EXTRACTIVE, make_chat_model
from crag.nodes.citations import CITE, citation_of, label, number_sources, render_sources
from crag.nodes.trail import context_of, note, recorded
from crag.nodes.verification import Draft, declined, verified
from crag.state import Citation, Passage, State, Strip, documents_seen
from crag.text import brief, sentence_key, split_sentences

log = logging.getLogger(__name__)

FALLBACK = "extractive fallback: "
#: What generate writes of an answer (a cached one included).
ANSWER_KEYS = (
    "answer",
    "citations",
    "answered",
    "support",
    "unsupported",
    "composite",
    "confidence",
)

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


def composite_of(
    citations: Sequence[Citation], numbered: list[tuple[Citation, list[Strip]]], docs: list[Passage]
) -> float:
    """The mean composite confidence of the sources an answer cites (each source by its
    most confident cited chunk): the explanation beside the calibrated `confidence`."""
    by_id = {d["id"]: d for d in docs}
    values = [
        max(
            by_id[s["doc_id"]].get("confidence", by_id[s["doc_id"]].get("score", 0.0))
            for s in strips
        )
        for c, strips in numbered
        if c in citations and strips
    ]
    return round(sum(values) / len(values), 4) if values else 0.0


def with_conflicts(
    update: dict[str, Any], state: State, numbered: list[tuple[Citation, list[Strip]]]
) -> dict[str, Any]:
    """The answer, its sources' composite confidence, and a sentence for each conflict
    between sources that refinement settled: which source crag preferred, and why."""
    docs = documents_seen(state)
    update["composite"] = composite_of(update["citations"], numbered, docs)
    conflicts = state.get("conflicts") or []
    if not conflicts:
        return update

    def number_of(doc_id: str) -> int | None:
        return next(
            (c["n"] for c, strips in numbered if any(s["doc_id"] == doc_id for s in strips)), None
        )

    said = " ".join(disagreement(c, number_of) for c in conflicts)
    return {**update, "answer": f"{update['answer']} {said}".strip()}


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
    about: dict[str, Any] = {"question": state["question"]}
    if served := state.get("served"):  # the tenant's cached answer, passed on
        update = {key: served[key] for key in ANSWER_KEYS if key in served}
        update |= {"decline_reason": None, **note("the cached answer")}
        about["cached"] = True
    else:
        update = await answer(state, ctx)
        # a confident, verified answer is kept for the same question (the tenant's cache)
        if await asyncio.to_thread(cache.store, ctx, state["question"], {**state, **update}):
            step = update["path"][0]
            update["path"] = [{**step, "detail": f"{step['detail']}; cached"}]
    # the conversation keeps the reply, and the standalone question it answered
    return {**update, "messages": [AIMessage(update["answer"], response_metadata=about)]}


async def answer(state: State, ctx: Context) -> dict[str, Any]:
    """The answer's state update: answered, declined, or a near miss said as such; an
    answer says where its sources disagreed."""
    update = await _answer(state, ctx)
    if update["answered"]:
        numbered = number_sources(state.get("kept_strips") or [], documents_seen(state))
        update = with_conflicts(update, state, numbered)
    return {**update, "confidence": confidence_of(state, update)}


def confidence_of(state: State, update: dict[str, Any]) -> float:
    """The probability that this outcome (the answer, or the decline) is right."""
    return probability(
        signals(
            answered=update["answered"],
            kept_strips=len(state.get("kept_strips") or []),
            web_scores=[d.get("score", 0.0) for d in state.get("web_docs") or []],
            unmet_terms=bool(state.get("missing_terms") or update.get("unsupported")),
            decline_reason=update.get("decline_reason"),
        )
    )


def nothing_found(state: State, ctx: Context) -> str:
    """Why nothing reached the context, as the user reads it: the external source
    failed, or the closest passage found, scoring under the `lower` a source needs (the
    library's only where it names what the question asks about), so a reader knows
    where to look and how near it came."""
    if failed := state.get("web_error"):
        return f"(The external source failed: {failed})"
    grades = state.get("grades")
    unknown = grades["unknown"] if grades else []
    library = [] if unknown else list(state.get("docs") or [])
    seen = [d for d in [*library, *(state.get("web_docs") or [])] if "score" in d]
    said = f"The library never mentions {', '.join(unknown)}." if unknown else ""
    best = max(seen, key=lambda d: d["score"], default=None)
    if best is not None and best["score"] < ctx.grading.lower:
        said += (
            f"{' ' if said else ''}The closest passage found, {label(citation_of(best, 1))}, "
            f"scores {math.floor(best['score'] * 100 + 1e-9) / 100:.2f}; a source needs "
            f"{ctx.grading.lower:.2f}."
        )
    return f"({said})" if said else ""


def asked_of(state: State) -> list[Constraint]:
    """What the evidence must meet: the question's years, versions, names and subjects,
    and the thing a one-part question asks about that the library never writes, however
    it is typed ("catboost" as much as "CatBoost")."""
    grades = state.get("grades")
    asked = [*constraints(state["question"]), *subjects(state["question"])]
    never = [named(t) for t in (grades["unknown"] if grades else [])]
    return list(dict.fromkeys([*asked, *never]))


async def _answer(state: State, ctx: Context) -> dict[str, Any]:
    """The draft (the chat model's, or the best strips quoted), then its verification."""
    question = state["question"]
    kept = state.get("kept_strips") or []
    if not kept:
        return declined("no evidence", nothing_found(state, ctx), "no supporting source: declined")
    numbered = number_sources(kept, documents_seen(state))
    asked = asked_of(state) if ctx.generation.verify else []
    if ctx.models.chat_model == EXTRACTIVE:
        text = extractive_answer(numbered, asked=asked)
        return await verified(state, ctx, Draft(text, "extractive", False, False), numbered, asked)
    drafted, detail = await draft(question, numbered, ctx)
    if drafted is None:
        return declined("model found none", "", detail)
    made = Draft(drafted, detail, by_model=True, fallback=detail.startswith(FALLBACK))
    return await verified(state, ctx, made, numbered, asked)
