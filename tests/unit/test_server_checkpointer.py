"""The dev server's checkpointer (`crag.server`): what a deleted thread or a rolled-back
run held leaves the store, and what other threads and runs hold stays."""

from __future__ import annotations

import asyncio
import json
import operator
import sqlite3
from pathlib import Path
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from crag import server


class Count(TypedDict):
    seen: Annotated[list[str], operator.add]


def counter(checkpointer: server.ServerSaver):  # type: ignore[no-untyped-def]
    builder = StateGraph(Count)
    builder.add_node("step", lambda state: {"seen": ["x" * 1000]})
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder.compile(checkpointer=checkpointer)


def rows(db: Path) -> dict[str, list[tuple[str, str | None]]]:
    """Per table, each row's thread and the run that wrote its checkpoint."""
    with sqlite3.connect(db) as conn:
        checkpoints = [
            (thread, json.loads(meta).get("run_id"))
            for thread, meta in conn.execute("SELECT thread_id, metadata FROM checkpoints")
        ]
        writes = [(thread, None) for (thread,) in conn.execute("SELECT thread_id FROM writes")]
    return {"checkpoints": checkpoints, "writes": writes}


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server's checkpoints in a fresh home after three runs: two on thread a, one on b."""
    monkeypatch.setenv("CRAG_HOME", str(tmp_path))

    async def run_threads() -> None:
        async with server.checkpointer() as saver:
            graph = counter(saver)
            for thread, run in (("a", "run-a1"), ("a", "run-a2"), ("b", "run-b1")):
                config = {"configurable": {"thread_id": thread}, "metadata": {"run_id": run}}
                await graph.ainvoke({"seen": []}, config)  # type: ignore[arg-type]

    asyncio.run(run_threads())
    return tmp_path / server.SERVER_THREADS_FILE


def test_deleting_a_thread_frees_its_checkpoints_and_writes(db: Path) -> None:
    before = rows(db)
    assert {t for t, _ in before["checkpoints"]} == {"a", "b"}
    assert any(t == "a" for t, _ in before["writes"])

    async def delete() -> None:
        async with server.checkpointer() as saver:
            await saver.adelete_thread("a")

    asyncio.run(delete())  # the checkpointer's exit waits for the deletion it started
    after = rows(db)
    assert {t for t, _ in after["checkpoints"]} == {"b"}
    assert {t for t, _ in after["writes"]} <= {"b"}
    assert [r for r in after["checkpoints"] if r[0] == "b"] == [
        r for r in before["checkpoints"] if r[0] == "b"
    ]


def test_a_rolled_back_run_loses_only_its_own_checkpoints(db: Path) -> None:
    async def roll_back() -> list[str]:
        async with server.checkpointer() as saver:
            await saver.adelete_for_runs(["run-a2"])
            await saver.adelete_for_runs([])
            state = await counter(saver).aget_state({"configurable": {"thread_id": "a"}})
            return list(state.values["seen"])

    seen = asyncio.run(roll_back())
    runs = {run for _, run in rows(db)["checkpoints"]}
    assert "run-a2" not in runs
    assert {"run-a1", "run-b1"} <= runs
    assert len(seen) == 1  # thread a is back to its first run's state


def test_deleting_a_thread_returns_before_the_deletion_yields(db: Path) -> None:
    """The dev server removes a thread from its list at the place it found before it
    awaited the deletion: a deletion that yielded let others shift that list."""

    async def delete() -> None:
        async with server.checkpointer() as saver:
            started = saver.adelete_thread("a")
            with pytest.raises(StopIteration):
                started.send(None)  # done at its first step, nothing awaited
            assert {t for t, _ in rows(db)["checkpoints"]} == {"a", "b"}
            await saver.drain()
            assert {t for t, _ in rows(db)["checkpoints"]} == {"b"}

    asyncio.run(delete())
