"""`langgraph dev` serves the graphs offline: drive it as Studio would, with
langgraph-sdk, many threads at once, and read what the server printed meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from dev_server import DevServer, concurrent_runs, dev_server, have_cli, sample_questions
from requires import DEV, missing

PORT = "Which TCP port does the Lumen server's HTTPS API listen on by default?"
INCORRECT = "How can I bulk import a folder of Markdown files, including their front-matter tags?"


@pytest.fixture(scope="module")
def server(sample_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    if not have_cli():
        missing("langgraph-cli (the `langgraph` command)", DEV)
    with dev_server(sample_home, tmp_path_factory.mktemp("dev-server")) as running:
        yield running


def test_stream_interrupt_inspect_resume_and_history(server: DevServer) -> None:
    from langgraph_sdk import get_client

    async def scenario() -> None:
        client = get_client(url=server.url, timeout=120)
        graphs = {a["graph_id"] for a in await client.assistants.search()}
        assert {"crag", "crag-ingest"} <= graphs

        thread = await client.threads.create()
        nodes = []
        async for part in client.runs.stream(
            thread["thread_id"],
            "crag",
            input={"question": "How long do I have to ask for a full refund of an annual plan?"},
            stream_mode="updates",
        ):
            if part.event == "updates":
                nodes += list(part.data)
        assert nodes[:5] == ["condense", "cache_lookup", "split", "retrieve", "grade"]
        assert nodes[-3:] == ["refine", "generate", "verify"]
        # Studio draws every step as a node
        drawn = await client.assistants.get_graph("crag")
        assert {n["id"] for n in drawn["nodes"]} >= {*nodes, "refine", "rewrite", "web_search"}

        # A library question, paused before its draft is verified, then resumed.
        thread = await client.threads.create()
        await client.runs.wait(
            thread["thread_id"],
            "crag",
            input={"question": PORT},
            interrupt_before=["verify"],
        )
        paused = await client.threads.get_state(thread["thread_id"])
        assert paused["next"] == ["verify"]
        draft = paused["values"]["draft"]
        assert draft["text"] and not paused["values"].get("answer")
        final = await client.runs.wait(thread["thread_id"], "crag", input=None)
        assert isinstance(final, dict) and final["answered"] is True and "7420" in final["answer"]
        assert final["path"][-1]["node"] == "verify" and final["path"][-2]["node"] == "generate"

        # A web-path question, paused before the external search.
        thread = await client.threads.create()
        await client.runs.wait(
            thread["thread_id"],
            "crag",
            input={"question": INCORRECT},
            interrupt_before=["web_search"],
        )
        paused = await client.threads.get_state(thread["thread_id"])
        assert paused["next"] == ["web_search"]
        values = paused["values"]
        assert values["verdict"] in ("incorrect", "ambiguous")
        assert values["question"] == INCORRECT and values["web_query"]
        # A person edits the search query, then resumes.
        await client.threads.update_state(
            thread["thread_id"], {"web_query": "lumen-import markdown front matter"}
        )
        final = await client.runs.wait(thread["thread_id"], "crag", input=None)
        assert isinstance(final, dict)
        assert final["web_query"] == "lumen-import markdown front matter"
        assert final["answer"] and final["web_docs"]
        assert [step["node"] for step in final["path"]][-4:] == [
            "web_search",
            "refine",
            "generate",
            "verify",
        ]
        history = await client.threads.get_history(thread["thread_id"], limit=50)
        assert len(history) >= 6
        assert any(h["next"] == ["web_search"] for h in history)

    asyncio.run(scenario())


def test_a_runs_knobs_reach_it_by_flat_name_as_by_group(server: DevServer) -> None:
    """A server keeps only the context keys its schema names: a flat knob dropped there
    would run another tenant's library, or other settings, without a word."""
    from langgraph_sdk import get_client

    async def run(context: dict[str, object]) -> dict[str, object]:
        client = get_client(url=server.url, timeout=120)
        thread = await client.threads.create()
        final = await client.runs.wait(
            thread["thread_id"], "crag", input={"question": PORT}, context=context
        )
        assert isinstance(final, dict), final
        return final

    async def scenario() -> None:
        for context in ({"k": 3, "cache": False}, {"retrieval": {"k": 3}, "cache": False}):
            final = await run(context)
            assert len(final["scores"]) == 3 and not final["cached"], (context, final)
        for context in ({"tenant": "nobody"}, {"store": {"tenant": "nobody"}}):
            final = await run(context)  # nobody's library is empty: nothing to answer from
            assert final["tenant"] == "nobody" and final["answered"] is False, context

    asyncio.run(scenario())


def test_twenty_concurrent_threads_each_get_their_own_verdict_and_answer(
    server: DevServer,
) -> None:
    """Each sample question alone first, then 20 threads at once (each question in two or
    three of them): every thread ends with its own question's verdict and answer."""
    from langgraph_sdk import get_client

    questions = sample_questions()
    alone = {}
    for question in questions:
        (run,) = asyncio.run(concurrent_runs(server.url, [question]))
        assert run.error is None, run.error
        alone[question] = (run.values["verdict"], run.values["answer"])
    assert len(set(alone.values())) == len(questions)  # the questions tell threads apart
    assert {verdict for verdict, _ in alone.values()} >= {"correct", "incorrect"}

    asked = [questions[i % len(questions)] for i in range(20)]
    runs = asyncio.run(concurrent_runs(server.url, asked))
    assert [run.error for run in runs if run.error] == []
    assert len({run.thread_id for run in runs}) == 20
    for run in runs:
        got = (run.values["question"], run.values["verdict"], run.values["answer"])
        assert got == (run.question, *alone[run.question])

    async def stored() -> list[str]:
        client = get_client(url=server.url, timeout=60)
        states = [await client.threads.get_state(run.thread_id) for run in runs]
        return [state["values"]["question"] for state in states]

    assert asyncio.run(stored()) == asked  # each thread's checkpoint is its own run


def test_the_server_log_holds_no_logging_error_traceback_or_blocking_call(
    server: DevServer,
) -> None:
    """The server logs each run through structlog, whose records go through crag's
    log-record factory; what it printed is what a person stepping through runs reads."""
    runs = asyncio.run(concurrent_runs(server.url, sample_questions()))
    assert [run.error for run in runs if run.error] == []
    text = server.log.read_text(errors="replace")
    assert text.count("Background run succeeded") >= len(sample_questions()), text[-2000:]
    found = {word: len(lines) for word, lines in server.log_errors().items() if lines}
    first = next((lines[0] for lines in server.log_errors().values() if lines), "")
    assert not found, f"server log lines with {found}; the first: {first[:300]}"


def test_a_deleted_thread_leaves_nothing_in_the_servers_checkpoints(
    server: DevServer, sample_home: Path
) -> None:
    """The server keeps checkpoints in crag's home (`crag.server`), and deleting a thread
    removes them: the dev server's own in-memory store kept a deleted thread's values."""
    import sqlite3

    from langgraph_sdk import get_client

    from crag.server import SERVER_THREADS_FILE

    def stored(thread_id: str) -> int:
        with sqlite3.connect(sample_home / SERVER_THREADS_FILE) as conn:
            (n,) = conn.execute(
                "SELECT (SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?) + "
                "(SELECT COUNT(*) FROM writes WHERE thread_id = ?)",
                (thread_id, thread_id),
            ).fetchone()
        return int(n)

    async def scenario() -> tuple[int, int]:
        client = get_client(url=server.url, timeout=120)
        thread = await client.threads.create()
        await client.runs.wait(thread["thread_id"], "crag", input={"question": PORT})
        kept = stored(thread["thread_id"])
        await client.threads.delete(thread["thread_id"])
        for _ in range(50):  # the deletion finishes just after the reply
            if not stored(thread["thread_id"]):
                break
            await asyncio.sleep(0.1)
        return kept, stored(thread["thread_id"])

    kept, left = asyncio.run(scenario())
    assert kept > 8  # a checkpoint per step, and their writes
    assert left == 0


def test_threads_deleted_at_once_are_the_ones_that_go(server: DevServer) -> None:
    """Many deletions at once each remove their own thread, and the others stay listed
    (the server removes a thread at the place it found before the checkpoints went)."""
    from langgraph_sdk import get_client

    async def scenario() -> tuple[set[str], set[str]]:
        client = get_client(url=server.url, timeout=120)
        made = [(await client.threads.create())["thread_id"] for _ in range(24)]
        gone, kept = made[::2], set(made[1::2])
        await asyncio.gather(*(client.threads.delete(t) for t in gone))
        listed = {t["thread_id"] for t in await client.threads.search(limit=1000)}
        return kept, listed & set(made)

    kept, listed = asyncio.run(scenario())
    assert listed == kept
