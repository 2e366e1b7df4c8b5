"""No API key in anything crag prints, logs, stores or reports.

The suite runs with fake keys set (`tests/conftest.py`). Here representative commands
run with them, against servers that do the worst a server can: answer 401 quoting the
key they were sent (as some OpenAI-compatible servers and proxies do). Everything is
collected (stdout, stderr, log records at DEBUG, the state, `--json`, the `crag eval`
report folder) and searched for the keys; the counts end `make test`.
"""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from processes import raw_server
from tenants import ACME, write_tenant

from crag.api import ask, summary
from crag.cli.main import main
from crag.context import Context
from crag.ingest.indexer import ingest_path

KEYS = ("OPENAI_API_KEY", "TAVILY_API_KEY")
QUESTION = "How long is the refund window for annual plans?"
OFF_TOPIC = "What does the Quillon blog say about offline mode?"


def _quote_the_key(handler: BaseHTTPRequestHandler) -> tuple[int, bytes]:
    """Refuse the request, quoting its key and body back."""
    body = getattr(handler, "body", b"").decode()
    said = f"Incorrect API key provided: {handler.headers.get('Authorization')} in {body}"
    error = {"error": {"message": said, "type": "invalid_request_error"}, "detail": said}
    return 401, json.dumps(error).encode()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("secrets")
    library, external = write_tenant(root / "docs", ACME)
    home = root / "home"
    assert ingest_path(Context(home=home), library).exit_code == 0
    assert ingest_path(Context(home=home), external, collection="external").exit_code == 0
    return home


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name in KEYS:
        assert len(os.environ.get(name, "")) > 20  # the suite's fake keys
    with raw_server(_quote_the_key) as url:
        monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
        monkeypatch.setenv("CRAG_TAVILY_BASE_URL", url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        yield url


def _keys_in(*texts: str) -> int:
    return sum(text.count(os.environ[name]) for text in texts for name in KEYS)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out + err


@pytest.fixture
def check(caplog: pytest.LogCaptureFixture, tally: Any) -> Iterator[Any]:
    caplog.set_level(logging.DEBUG)

    def checked(kind: str, *texts: str) -> int:
        logs = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
        found = _keys_in(*texts, logs, caplog.text)
        caplog.clear()
        tally.add("API keys shown", found)
        tally("secret", kind, found == 0)
        return found

    yield checked


def test_cli_commands_show_no_key(
    home: Path,
    servers: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    check: Any,
) -> None:
    base = ("--home", home)
    library = home.parent / "docs"  # the folder the home's library was ingested from
    runs: list[tuple[str, tuple[str | Path, ...], int]] = [
        ("ingest --json", ("ingest", library / "acme/library", *base, "--json"), 0),
        ("ask --json", ("ask", QUESTION, *base, "--no-llm", "--json"), 0),
        (
            "ask, Tavily refusing the key",
            ("ask", OFF_TOPIC, *base, "--no-llm", "--external", "tavily", "--json"),
            0,
        ),
        (
            "ask, OpenAI chat refusing the key",
            ("ask", QUESTION, *base, "--chat-model", "openai:m", "--grader", "features"),
            0,
        ),
        (
            "ask -v, OpenAI chat and Tavily refusing the key",
            (
                *("-v", "ask", OFF_TOPIC, *base, "--chat-model", "openai:m"),
                *("--grader", "judge", "--external", "tavily", "--json"),
            ),
            0,
        ),
        (
            "ingest -v, OpenAI embeddings refusing the key",
            (
                *("-v", "ingest", library / "acme/library", *base),
                *("--collection", "remote", "--embeddings", "openai:e"),
            ),
            1,
        ),
        ("chat, a follow-up", ("chat", *base, "--no-llm", "--thread", "s"), 0),
    ]
    quoted = 0  # outputs where a server quoted the key and crag printed "[secret]" instead
    for kind, argv, expected in runs:
        if argv[0] == "chat":
            monkeypatch.setattr("sys.stdin", io.StringIO(f"{QUESTION}\nAnd for monthly plans?\n"))
        code, output = _cli(capsys, *argv)
        assert code == expected, (kind, output[-2000:])
        assert check(kind, output) == 0, kind
        quoted += "[secret]" in output
    assert quoted >= 1  # a server did quote the key: the test saw the worst case


def test_the_state_and_the_python_api_show_no_key(home: Path, servers: str, check: Any) -> None:
    ctx = Context(home=home, chat_model="openai:m", grader="judge", external="tavily")
    state = ask(OFF_TOPIC, context=ctx)
    assert state["web_error"].startswith("tavily: ")
    shown = {k: v for k, v in state.items() if k != "messages"}
    texts = [json.dumps(shown, default=str), json.dumps(summary(state))]
    texts += [str(m.content) for m in state.get("messages") or []]
    assert check("Python API: ask() state, summary and messages", *texts) == 0


def test_an_eval_report_shows_no_key(
    home: Path, servers: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], check: Any
) -> None:
    questions = tmp_path / "questions.jsonl"
    rows = [
        {"id": "q1", "question": QUESTION, "category": "internal", "expected_verdict": "correct"},
        {"id": "q2", "question": OFF_TOPIC, "category": "external"},
    ]
    rows[1]["expected_verdict"] = "incorrect"
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "report"
    argv = ["eval", questions, "--home", home, "--out", out, "--quiet"]
    argv += ["--chat-model", "openai:m", "--grader", "features", "--external", "tavily"]
    argv += ["--systems", "crag,naive"]
    code, output = _cli(capsys, *argv)
    assert code in (0, 1), output[-2000:]
    files = [p.read_text(errors="replace") for p in out.rglob("*") if p.suffix != ".png"]
    assert files and any("web_error" in f or "tavily" in f for f in files)
    assert check("crag eval: output and report folder", output, *files) == 0
