"""The ingest graph that `langgraph dev` serves as `crag-ingest`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from crag.context import Context


def test_graph_shape() -> None:
    from crag.ingest.graph import graph

    assert graph.name == "crag-ingest"
    assert graph.checkpointer is None  # langgraph dev refuses graphs that bring their own
    assert set(graph.get_input_jsonschema()["properties"]) == {"path", "prune", "collection"}
    assert set(graph.get_output_jsonschema()["properties"]) == {"summary", "error"}


def test_graph_ingests_and_streams_progress(tmp_path: Path) -> None:
    from crag.ingest.graph import graph

    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "note.md").write_text("# Note\n\nA short note about attention heads.\n", "utf-8")
    (lib / "bad.pdf").write_bytes(b"")
    ctx = Context(home=tmp_path / "home")

    async def run() -> tuple[list[Any], dict[str, Any]]:
        events: list[Any] = []
        final: dict[str, Any] = {}
        async for mode, chunk in graph.astream(
            {"path": str(lib), "collection": "notes"},
            context=ctx,
            stream_mode=["custom", "values"],
        ):
            if mode == "custom":
                events.append(chunk)
            else:
                final = chunk
        return events, final

    events, final = asyncio.run(run())
    summary = final["summary"]
    assert summary["files_ok"] == 1 and summary["files_failed"] == 1
    assert summary["collection"] == "notes" and summary["exit_code"] == 1
    assert summary["failures"] == [{"source": "bad.pdf", "reason": "empty file (0 bytes)"}]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "done" and "progress" in kinds

    again = asyncio.run(graph.ainvoke({"path": str(lib), "collection": "notes"}, context=ctx))
    assert again["summary"]["files_unchanged"] == 1


def test_graph_reports_a_bad_path(tmp_path: Path) -> None:
    from crag.ingest.graph import graph

    out = asyncio.run(
        graph.ainvoke({"path": str(tmp_path / "missing")}, context=Context(home=tmp_path))
    )
    assert "no such file or folder" in out["error"] and "summary" not in out
