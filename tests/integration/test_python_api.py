"""The Python API as a LangGraph user writes it: `from crag import graph`, sync and async
calls, calls from inside a running event loop, and conversations on a thread."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from crag import Context, ask, graph
from crag.graph import Graph

PORT_QUESTION = "Which TCP port does the Lumen server's HTTPS API listen on by default?"
FOLLOW_UP = "And which setting changes it?"


def test_from_crag_import_graph_is_the_compiled_graph_in_any_import_order() -> None:
    orders = (
        "from crag import graph",
        "import crag.api\nfrom crag import graph",
        "from crag import ask, graph",
        "import crag.graph\nimport crag\ngraph = crag.graph",
    )
    for order in orders:
        code = f"{order}\nprint(type(graph).__name__, hasattr(graph, 'astream'))"
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
        )
        assert out.stdout.split() == ["Graph", "True"], (order, out.stdout, out.stderr)
    assert isinstance(graph, Graph)


def test_invoke_and_stream_work_synchronously(sample_home: Path) -> None:
    ctx = Context(home=sample_home, chat_model="extractive")
    state = graph.invoke({"question": PORT_QUESTION}, context=ctx)
    assert state["verdict"] == "correct" and state["docs"]
    nodes = [n for chunk in graph.stream({"question": PORT_QUESTION}, context=ctx) for n in chunk]
    assert nodes == ["retrieve", "grade", "refine", "generate"]


def test_leaving_a_sync_stream_early_stops_it(sample_home: Path) -> None:
    ctx = Context(home=sample_home, chat_model="extractive")
    for chunk in graph.stream({"question": PORT_QUESTION}, context=ctx):
        assert list(chunk) == ["retrieve"]
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
