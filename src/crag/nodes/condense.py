"""condense: the run's start. The question is read (from the input, or a chat client's
last message) and checked, and a follow-up on a thread becomes the standalone question
it stands for; every per-run key of the state starts empty. The run takes its place in
the local model's line here, so runs are served in the order they started, not in the
order they first reach the model.

"And for monthly plans?" means nothing to retrieval on its own. With a language model
the conversation is condensed into one question (the retrieval-agent pattern); with
none, a follow-up carries the key terms of the question before it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from crag import prompts
from crag.context import Context
from crag.grading.decompose import carried, is_follow_up
from crag.models.chat import EXTRACTIVE, make_chat_model
from crag.models.slots import ARRIVALS
from crag.nodes.trail import context_of, note, recorded
from crag.state import State, clean_question, fresh_run

log = logging.getLogger(__name__)

#: Turns of conversation shown to the model, and characters kept of each answer.
HISTORY_TURNS, ANSWER_CHARS = 3, 300


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
            ]
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
    said: list[HumanMessage] = []
    if messages and isinstance(messages[-1], HumanMessage):
        asked: Any = messages.pop().text  # a chat client sends the question as a message
    else:
        asked = state.get("question")
        said = [HumanMessage(str(asked))]
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
