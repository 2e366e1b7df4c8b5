"""Follow-ups read with the conversation, and answers streamed as they are written."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from crag.context import Context
from crag.grading.decompose import carried, is_follow_up
from crag.nodes.retrieve import earlier_turns, standalone
from crag.prompts import partial_answer


@pytest.mark.parametrize(
    ("question", "follows"),
    [
        ("And for monthly plans?", True),
        ("What about the Business plan?", True),
        ("How do I change it?", True),
        ("Why?", True),
        ("Which TCP port does the Lumen server listen on by default?", False),
        ("How does batch normalization speed up training?", False),
        # words that point at nothing: there with "be", it before a judgement, that as "which"
        ("Is there a limit on API requests per minute?", False),
        ("Is it possible to run the Lumen server on ARM machines?", False),
        ("What is the setting that controls the HTTPS port?", False),
        ("What are the settings that matter most for latency?", False),
        # and the same words pointing back
        ("How do I change that setting in lumen.toml?", True),
        ("Is that still true in 2025 for the server?", True),
        ("How do I log in to the admin console there?", True),
        ("Is it still supported on Windows servers?", True),
    ],
)
def test_what_reads_as_a_follow_up(question: str, follows: bool) -> None:
    assert is_follow_up(question) is follows


def test_a_follow_up_carries_the_earlier_questions_terms_once() -> None:
    out = carried("And for monthly plans?", "How long is the refund window of annual plans?")
    assert out.startswith("And for monthly plans? (")
    assert "refund" in out and "window" in out
    assert out.count("plans") == 1  # a term the follow-up already has is not repeated


def test_earlier_turns_come_from_the_answers_metadata() -> None:
    messages = [
        HumanMessage("How long is the refund window?"),
        AIMessage("30 days [1].", response_metadata={"question": "refund window (annual)"}),
        HumanMessage("And monthly?"),
    ]
    assert earlier_turns(messages) == [("refund window (annual)", "30 days [1].")]


def test_without_a_model_a_standalone_question_is_left_alone(tmp_path: object) -> None:
    ctx = Context(home=tmp_path, chat_model="extractive")
    history = [HumanMessage("a"), AIMessage("b", response_metadata={"question": "refunds"})]
    own = "How does batch normalization speed up training?"
    assert asyncio.run(standalone(own, history, ctx)) == (own, "")
    assert asyncio.run(standalone("And monthly?", [], ctx)) == ("And monthly?", "")
    question, how = asyncio.run(standalone("And monthly?", history, ctx))
    assert question == "And monthly? (refunds)" and "follow-up" in how


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        ('{"ans', ""),
        ('{"answer": "Hel', "Hel"),
        ('{"answer": "He said \\"hi', 'He said "hi'),
        ('{"answer": "caf\\u00e', "caf"),  # half an escape waits for the rest
        ('{"answer": "caf\\u00e9", "fo', "café"),
        ('{"answer": "done [1].", "found": true}', "done [1]."),
        ('{"answer": "a\\\\", "found": true}', "a\\"),
    ],
)
def test_the_answer_is_read_from_json_still_arriving(raw: str, text: str) -> None:
    assert partial_answer(raw) == text
