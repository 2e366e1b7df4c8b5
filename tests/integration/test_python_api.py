"""The Python API as a LangGraph user writes it: `from crag import graph`, sync and async
calls, calls from inside a running event loop, and conversations on a thread."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from answering import CORRECT_PATH

from crag import Context, ask, graph
from crag.graph import Graph

PORT_QUESTION = "Which TCP port does the Lumen server's HTTPS API listen on by default?"
FOLLOW_UP = "And which setting changes it?"
REFUND_QUESTION = "How long do I have to ask for a full refund of an annual Lumen subscription?"


def test_from_crag_import_graph_is_the_compiled_graph_in_any_import_order() -> None:
    orders = (
        "from crag import graph",
        "import crag.api\nfrom crag import graph",
        "from crag import ask, graph",
        "import crag.graph\nimport crag\ngraph = crag.graph",
    )
    started = []  # a fresh interpreter each, all at once
    for order in orders:
        code = f"{order}\nprint(type(graph).__name__, hasattr(graph, 'astream'))"
        started.append(
            subprocess.Popen(
                [sys.executable, "-c", code],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for order, proc in zip(orders, started, strict=True):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and out.split() == ["Graph", "True"], (order, out, err)
    assert isinstance(graph, Graph)


REFUND = "How long do I have to ask for a full refund of an annual Lumen subscription?"
NGINX = "How should nginx be configured so that Lumen's WebSocket sync stays connected?"


def test_the_compiled_graph_awaited_and_streamed_as_messages(sample_home: Path) -> None:
    """`await graph.ainvoke`, `graph.astream` of updates and of messages, and two runs
    awaited at once on one event loop, each with its own question's verdict."""
    ctx = Context(home=sample_home, chat_model="extractive")
    question = {"question": REFUND}

    async def scenario() -> tuple[Any, list[str], list[tuple[Any, str]], list[Any]]:
        state = await graph.ainvoke(question, context=ctx)
        nodes = [node async for chunk in graph.astream(question, context=ctx) for node in chunk]
        messages = [
            (message, meta["langgraph_node"])
            async for message, meta in graph.astream(question, context=ctx, stream_mode="messages")
        ]
        both = await asyncio.gather(
            graph.ainvoke({"question": REFUND}, context=ctx),
            graph.ainvoke({"question": NGINX}, context=ctx),
        )
        return state, nodes, messages, list(both)

    state, nodes, messages, both = asyncio.run(scenario())
    assert state["verdict"] == "correct" and "30 days" in state["answer"]
    assert nodes == CORRECT_PATH
    kinds = [(type(message).__name__, node) for message, node in messages]
    assert kinds[0] == ("HumanMessage", "condense") and kinds[-1] == ("AIMessage", "verify")
    assert messages[0][0].content == REFUND and messages[-1][0].content == state["answer"]
    assert [(s["question"], s["verdict"]) for s in both] == [
        (REFUND, "correct"),
        (NGINX, "incorrect"),
    ]
    assert both[0]["answer"] == state["answer"]


def test_a_question_split_edited_before_retrieval_is_the_one_graded(sample_home: Path) -> None:
    """Interrupted before retrieve, a person reads the parts split found and replaces
    them; the resumed run retrieves and grades the parts as edited."""
    from langgraph.checkpoint.memory import InMemorySaver

    from crag.graph import build, compiled

    ctx = Context(home=sample_home, chat_model="extractive", cache=False)
    paused = compiled(build(), checkpointer=InMemorySaver(), interrupt_before=["retrieve"])
    config: Any = {"configurable": {"thread_id": "edit-the-split"}}
    question = "What does the Team plan cost, and which port does the API use?"
    paused.invoke({"question": question}, config, context=ctx)
    found = paused.get_state(config)
    assert found.next == ("retrieve",) and len(found.values["split"]["parts"]) == 2
    edited = ["What does the Team plan cost per month?", "Which TCP port does the API use?"]
    paused.update_state(config, {"split": {"parts": edited, "how": "edited", "compares": False}})
    state = paused.invoke(None, config, context=ctx)
    assert [p["text"] for p in state["parts"]] == edited
    assert [t["text"] for t in state["part_tasks"]] == edited


def test_invoke_and_stream_work_synchronously(sample_home: Path) -> None:
    ctx = Context(home=sample_home, chat_model="extractive")
    state = graph.invoke({"question": PORT_QUESTION}, context=ctx)
    assert state["verdict"] == "correct" and state["docs"]
    nodes = [n for chunk in graph.stream({"question": PORT_QUESTION}, context=ctx) for n in chunk]
    assert nodes == CORRECT_PATH


def test_leaving_a_sync_stream_early_stops_it(sample_home: Path) -> None:
    ctx = Context(home=sample_home, chat_model="extractive")
    for chunk in graph.stream({"question": PORT_QUESTION}, context=ctx):
        assert list(chunk) == ["condense"]
        break
    # the background loop is free for the next run
    assert graph.invoke({"question": PORT_QUESTION}, context=ctx)["verdict"] == "correct"


def test_sync_calls_work_inside_a_running_event_loop(sample_home: Path) -> None:
    ctx = Context(home=sample_home, chat_model="extractive")

    async def notebook_cell() -> tuple[str, str]:
        a = ask(PORT_QUESTION, context=ctx)
        b = graph.invoke({"question": PORT_QUESTION}, context=ctx)
        return a["verdict"], b["verdict"]

    assert asyncio.run(notebook_cell()) == ("correct", "correct")


def test_a_follow_up_is_read_with_the_question_before_it(sample_home: Path) -> None:
    ctx = Context(home=sample_home, chat_model="extractive", external="none")
    alone = ask(FOLLOW_UP, context=ctx)
    assert not alone["answered"]  # on its own it asks about nothing in particular
    ask(PORT_QUESTION, context=ctx, thread_id="t-follow")
    second = ask(FOLLOW_UP, context=ctx, thread_id="t-follow")
    assert second["question"] != FOLLOW_UP and "port" in second["question"]
    assert second["answered"] and "7420" in second["answer"], second["answer"]
    kinds = [m.type for m in second["messages"]]
    assert kinds == ["human", "ai", "human", "ai"]
    assert second["messages"][2].content == FOLLOW_UP  # the conversation keeps the words used
    assert "follow-up" in second["path"][0]["detail"]


def test_each_step_is_reported_with_the_values_it_wrote(sample_home: Path) -> None:
    from crag.api import astream

    ctx = Context(home=sample_home, chat_model="extractive", external="none")
    steps: list[tuple[str, dict[str, Any]]] = []
    ask(PORT_QUESTION, context=ctx, on_step=lambda node, update: steps.append((node, update)))

    async def streamed() -> list[tuple[str, dict[str, Any]]]:
        return [step async for step in astream(PORT_QUESTION, context=ctx)]

    for node, update in [*steps, *asyncio.run(streamed())]:
        json.dumps(update, default=str)  # plain values, as a caller prints them
        assert not any(type(v).__name__ == "Overwrite" for v in update.values()), node
    (start,) = [update for node, update in steps if node == "condense"]
    assert start["redacted"] == [] and start["path"][0]["node"] == "condense"


def test_a_turn_that_failed_leaves_the_next_question_its_own(sample_home: Path) -> None:
    ctx = Context(home=sample_home, chat_model="extractive", external="none")
    with pytest.raises(Exception, match="nope"):  # fails in the graph, after condense
        ask(REFUND_QUESTION, context=ctx.with_overrides(collection="nope"), thread_id="t-fail")
    state = ask(PORT_QUESTION, context=ctx, thread_id="t-fail")
    assert state["question"] == PORT_QUESTION and "7420" in state["answer"], state["answer"]
    # the failed turn's question is not left in the conversation without its answer
    assert (state["messages"][0].type, state["messages"][0].content) == ("human", PORT_QUESTION)
    assert len(state["messages"]) == 2


def test_two_questions_at_once_on_one_thread_are_both_kept(sample_home: Path) -> None:
    from crag import aask

    ctx = Context(home=sample_home, chat_model="extractive", external="none", cache=False)

    async def both() -> None:
        await asyncio.gather(
            aask(PORT_QUESTION, context=ctx, thread_id="t-both"),
            aask(REFUND_QUESTION, context=ctx, thread_id="t-both"),
        )

    asyncio.run(both())
    state = ask(FOLLOW_UP, context=ctx, thread_id="t-both")
    asked = [m.content for m in state["messages"] if m.type == "human"]
    assert sorted(asked[:2]) == sorted([PORT_QUESTION, REFUND_QUESTION]) and len(asked) == 3
    assert [m.type for m in state["messages"]] == ["human", "ai"] * 3


def test_a_thread_keeps_its_last_turns_only(
    sample_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("crag.nodes.retrieve.KEPT_TURNS", 2)
    ctx = Context(home=sample_home, chat_model="extractive", external="none")
    for question in (REFUND_QUESTION, PORT_QUESTION, FOLLOW_UP):
        state = ask(question, context=ctx, thread_id="t-kept")
    asked = [m.content for m in state["messages"] if m.type == "human"]
    assert asked == [PORT_QUESTION, FOLLOW_UP] and len(state["messages"]) == 4
    assert "port" in state["question"]  # the follow-up still reads the turn before


def test_a_conversation_resumes_in_a_new_process(sample_home: Path, tmp_path: Path) -> None:
    """The checkpointer is SQLite in CRAG_HOME: a restart keeps the thread."""
    script = textwrap.dedent(
        """
        import json, sys
        from crag import Context, ask
        ctx = Context(home=sys.argv[1], chat_model="extractive", external="none")
        state = ask(sys.argv[2], context=ctx, thread_id="t-restart")
        print(json.dumps({
            "answered": state["answered"], "answer": state["answer"],
            "turns": len(state["messages"]),
        }))
        """
    )
    turns = []
    for question in (PORT_QUESTION, FOLLOW_UP):
        out = subprocess.run(
            [sys.executable, "-c", script, str(sample_home), question],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr
        turns.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert turns[0]["turns"] == 2
    assert turns[1]["answered"] and "7420" in turns[1]["answer"] and turns[1]["turns"] == 4
    assert (sample_home / "threads.sqlite").is_file()


def test_a_thread_needs_an_existing_home(tmp_path: Path) -> None:
    ctx = Context(home=tmp_path / "never", chat_model="extractive")
    with pytest.raises(Exception, match="crag ingest"):
        ask(PORT_QUESTION, context=ctx, thread_id="t")
    assert not (tmp_path / "never").exists()
