"""Server mode: `chroma run` on loopback, ingest and query through CRAG_CHROMA_URL."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from processes import free_port

from crag.cli.main import main
from crag.context import Context
from crag.errors import StoreError
from crag.retrieval.clients import open_client
from crag.retrieval.library import describe, retrieve


def test_ingest_and_query_through_the_server(
    chroma_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "dropout.md").write_text(
        "# Dropout\n\nDropout zeroes out random hidden units during training to fight "
        "overfitting.\n",
        encoding="utf-8",
    )
    (lib / "adam.md").write_text(
        "# Adam\n\nAdam adapts the learning rate of each parameter from running averages of "
        "gradients.\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("CRAG_CHROMA_URL", chroma_url)
    home = tmp_path / "home"
    argv = ["ingest", str(lib), "--home", str(home), "--collection", "server-books", "-q"]
    assert main(argv) == 0, capsys.readouterr()
    assert "2 file(s) indexed" in capsys.readouterr().out
    assert not (home / "chroma").exists()  # nothing written to the embedded store

    ctx = Context(home=home)
    assert ctx.store.chroma_url == chroma_url
    hits = retrieve(ctx, "server-books", "How does dropout reduce overfitting?", 2)
    assert hits[0]["metadata"]["source"] == "dropout.md"
    assert 0.0 <= hits[1]["similarity"] <= hits[0]["similarity"] <= 1.0
    assert describe(ctx, "server-books")["chunks"] == 2

    # a re-run through the server is incremental too
    assert main(argv) == 0
    assert "0 file(s) indexed, 2 unchanged" in capsys.readouterr().out


def test_cli_reports_an_unreachable_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.md").write_text("# A\n\nSome text to index here.\n", encoding="utf-8")
    monkeypatch.setenv("CRAG_CHROMA_URL", f"http://127.0.0.1:{free_port()}")
    code = main(["ingest", str(tmp_path / "a.md"), "--home", str(tmp_path)])
    assert code == 1
    assert "cannot reach the Chroma server" in capsys.readouterr().err


def test_a_server_that_never_answers_times_out(tmp_path: Path) -> None:
    """A listening socket that never replies: connecting succeeds, every read waits."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        ctx = Context(home=tmp_path, chroma_url=f"http://127.0.0.1:{silent.getsockname()[1]}")
        ctx = ctx.with_overrides(timeout_s=1.0)
        with pytest.raises(StoreError, match="no answer within 1 s"):
            open_client(ctx)
    finally:
        silent.close()
