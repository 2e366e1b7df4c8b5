"""A follow-up on a thread, read as the standalone question it stands for.

"And for monthly plans?" means nothing to retrieval on its own. With a language model
the conversation is condensed into one question (the retrieval-agent pattern); with
none, a follow-up carries the key terms of the question before it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage

from crag import prompts
from crag.context import Context
from crag.grading.decompose import carried, is_follow_up
from crag.models.chat import EXTRACTIVE, make_chat_model

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
