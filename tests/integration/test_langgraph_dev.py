"""`langgraph dev` serves the graphs offline; drive it as Studio would, with langgraph-sdk."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import free_port, serving

from crag.context import Context

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
INCORRECT = "How can I bulk import a folder of Markdown files, including their front-matter tags?"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from crag.ingest.indexer import ingest_path

    cli = Path(sys.executable).parent / "langgraph"
    if not cli.exists():
        pytest.skip("langgraph-cli is not installed (pip install 'crag[dev]')")
    home = tmp_path_factory.mktemp("dev-home")
    ctx = Context(home=home)
    assert ingest_path(ctx, SAMPLES / "library", collection="books").exit_code == 0
    assert ingest_path(ctx, SAMPLES / "external", collection="external").exit_code == 0
    workdir = tmp_path_factory.mktemp("dev-server")
    shutil.copy(REPO / "langgraph.json", workdir / "langgraph.json")
    config = (workdir / "langgraph.json").read_text().replace("./src/", f"{REPO}/src/")
    (workdir / "langgraph.json").write_text(config.replace('"."', f'"{REPO}"'))
    port = free_port()
    env = {
        **os.environ,
        "CRAG_HOME": str(home),
        "CRAG_CHAT_MODEL": "extractive",
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "1",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    url = f"http://127.0.0.1:{port}"
    with serving(
        [str(cli), "dev", "--no-browser", "--no-reload", "--port", str(port)],
        f"{url}/ok",
        workdir / "server.log",
        cwd=workdir,
        env=env,
        timeout_s=90,
    ):
        yield url


def test_stream_interrupt_inspect_resume_and_history(server: str) -> None:
    from langgraph_sdk import get_client

    async def scenario() -> None:
        client = get_client(url=server)
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
        assert nodes[:2] == ["retrieve", "grade"] and nodes[-2:] == ["refine", "generate"]

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
        assert [step["node"] for step in final["path"]][-3:] == [
            "web_search",
            "refine",
            "generate",
        ]
        history = await client.threads.get_history(thread["thread_id"], limit=50)
        assert len(history) >= 6
        assert any(h["next"] == ["web_search"] for h in history)

    asyncio.run(scenario())
