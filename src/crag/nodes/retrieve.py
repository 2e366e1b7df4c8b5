"""The nodes that take a question to the chunks grade reads: condense (the run's start,
and a follow-up read as the standalone question it stands for), cache_lookup (a
confident earlier answer ends the run), split (a question of several parts cut into
its parts) and retrieve (the library chunks nearest to the question and to each part).

"And for monthly plans?" means nothing to retrieval on its own. With a language model
the conversation is condensed into one question (the retrieval-agent pattern); with
none, a follow-up carries the key terms of the question before it. The run takes its
place in the local model's line in condense, so runs are served in the order they
started. Interrupted before `retrieve`, a question's parts can be read and edited.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
)
from langgraph.runtime import Runtime

from crag import cache, prompts
from crag.context import Context
from crag.grading.decompose import Split, carried, decompose, is_follow_up
from crag.models import ARRIVALS
from crag.models.chat import EXTRACTIVE, UNSTREAMED, make_chat_model
from crag.nodes.trail import context_of, note, recorded
from crag.retrieval.library import hit_to_passage
from crag.retrieval.library import retrieve as library_retrieve
from crag.retrieval.library_index import without_boilerplate
from crag.state import Passage, QuestionSplit, State, clean_question, fresh_run
from crag.text import counted

log = logging.getLogger(__name__)

#: Marks the message condense writes for a question given as `question`. Left last by a
#: run that failed, it is that run's question, not the next one's.
ASKED = "crag_question"
#: Turns of conversation shown to the model, and characters kept of each answer.
HISTORY_TURNS, ANSWER_CHARS = 3, 300
#: Turns a thread keeps: older ones are never read again, and each would be written
#: into every later checkpoint of the thread.
KEPT_TURNS = 50


def earlier_turns(messages: Sequence[AnyMessage]) -> list[tuple[str, str]]:
    """(standalone question, answer) of each finished turn, oldest first."""
    turns = []
    for message in messages:
        if isinstance(message, AIMessage):
            asked = str(message.response_metadata.get("question", ""))
            turns.append((asked, str(message.content)))
    return [(q, a) for q, a in turns if q]


async def standalone(
    question: str, messages: Sequence[AnyMessage], ctx: Context
) -> tuple[str, str]:
    """(the question to retrieve for, how it was read) for a turn of a conversation."""
    turns = earlier_turns(messages)
    if not turns or not is_follow_up(question):
        return question, ""
    rule = carried(question, turns[-1][0])
    if ctx.models.chat_model == EXTRACTIVE:
        return rule, f"follow-up, with the last question's terms: {rule}"
    history = "\n".join(
        f"User: {q}\nAssistant: {a[:ANSWER_CHARS]}" for q, a in turns[-HISTORY_TURNS:]
    )
    model = make_chat_model(ctx.models.chat_model, ctx, max_tokens=64)
    try:
        reply = await model.ainvoke(
            [
                SystemMessage(prompts.CONDENSE_SYSTEM),
                HumanMessage(prompts.CONDENSE_USER.format(history=history, question=question)),
            ],
            config=UNSTREAMED,
        )
        condensed = " ".join(str(reply.content).split())
    except Exception as exc:  # condensing is an aid: fall back to the rule
        log.warning("condensing the follow-up failed (%s); using the rule", exc)
        condensed = ""
    if not 2 <= len(condensed) <= ctx.retrieval.max_question_chars:
        return rule, f"follow-up, with the last question's terms: {rule}"
    return condensed, f"follow-up, condensed: {condensed}"


@recorded
async def condense(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    ARRIVALS.came()
    messages = list(state.get("messages") or [])
    said: list[BaseMessage] = []
    last = messages[-1] if messages else None
    if isinstance(last, HumanMessage) and not last.additional_kwargs.get(ASKED):
        asked: Any = messages.pop().text  # a chat client sends the question as a message
    else:
        if isinstance(last, HumanMessage) and last.id:  # a failed run's question: unanswered
            messages.pop()
            said.append(RemoveMessage(id=last.id))
        asked = state.get("question")
        said.append(HumanMessage(str(asked), additional_kwargs={ASKED: True}))
    if (overflow := len(messages) - 2 * (KEPT_TURNS - 1)) > 0:
        said = [RemoveMessage(id=m.id) for m in messages[:overflow] if m.id] + said
        messages = messages[overflow:]
    # bounded work on any input, also for callers that skip the API (langgraph dev)
    asked = clean_question(asked, ctx.retrieval.max_question_chars)
    question, reading = await standalone(asked, messages, ctx)
    return {
        **fresh_run(),
        "tenant": ctx.store.tenant,
        "question": question,
        "messages": said,
        **note(reading or "a question of its own"),
    }


@recorded
async def cache_lookup(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    if not ctx.cache.enabled:
        return {"cached": False, "library_version": None, **note("the answer cache is off")}
    library = await asyncio.to_thread(cache.version, ctx)
    hit = await asyncio.to_thread(cache.lookup, ctx, state["question"], library)
    if hit is None:
        return {"cached": False, "library_version": library, **note("no cached answer")}
    about = {"question": state["question"], "cached": True}
    return {
        **{key: hit.result[key] for key in cache.KEPT if key in hit.result},
        "cached": True,
        "library_version": library,
        "decline_reason": None,
        # the conversation keeps the reply, and the standalone question it answered
        "messages": [AIMessage(hit.result.get("answer", ""), response_metadata=about)],
        **note(f"cached answer (similarity {hit.similarity:.2f} to {hit.question!r})"),
    }


def after_lookup(state: State) -> Literal["split", "__end__"]:
    """A cached answer ends the run; any other question goes on."""
    return "__end__" if state.get("cached") else "split"  # END


@recorded
async def split(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    found = await decompose(state["question"], ctx) if ctx.retrieval.decompose else Split([], "off")
    if found.parts:
        detail = f"{len(found.parts)} parts, by {found.how}: " + "; ".join(found.parts)
    else:
        detail = "decomposition off" if found.how == "off" else "one part"
    made = QuestionSplit(parts=list(found.parts), how=found.how, compares=found.compares)
    return {"split": made, **note(detail)}


def split_of(state: State) -> Split:
    """The run's split as `crag.grading.decompose` reads it (no parts before `split`)."""
    made = state.get("split")
    return Split(made["parts"], made["how"], made["compares"]) if made else Split([], "off")


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
    detail = f"{counted(len(docs), 'chunk')} from {ctx.store.collection!r}"
    if dropped:
        detail += f" ({dropped} of boilerplate only dropped)"
    parts = split_of(state).parts
    by_part: list[Passage] = []
    if len(parts) >= 2:  # each part graded on its own, with chunks of its own
        for part in parts:
            by_part += await nearest(ctx, part, ctx.retrieval.k)
        detail += f"; {len(by_part)} more for its {len(parts)} parts"
    return {"retrieved": docs, "part_retrieved": by_part, **note(detail)}
