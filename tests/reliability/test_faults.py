"""Faults crag must survive: failing external services, failing models, files that change
under an ingest, interruptions, concurrent runs, hostile bytes on the way to a terminal.

Each test goes through a real entry point (the CLI's `main`, `crag.api`, a subprocess)
and records its kind under "fault" in the reliability tally. The helpers at the top
(`cli`, `tried`, `write_library`, `stored`) are shared with test_inputs.py and
test_kills.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from fake_tavily import FakeTavily

# --- shared helpers ------------------------------------------------------------------------
from fakes import FakeEmbeddings
from processes import Respond, free_port, raw_server

from crag.api import aask, ask, summary
from crag.cli.main import main
from crag.context import Context
from crag.ingest import indexer
from crag.ingest.discovery import discover
from crag.ingest.indexer import Ingestor, ingest_path
from crag.retrieval.clients import get_collection, open_client
from crag.retrieval.library import iter_records, unpacked

TOPICS = ("dropout", "attention", "convolution", "recurrence")
#: A question the small library cannot answer: verdict incorrect, so the web path runs.
OFF_TOPIC = "What is the capital of Mongolia?"
ANSWERABLE = "What is dropout?"
#: C0/C1 control characters a terminal would obey (line breaks and tabs aside).
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    """`crag ARGV` in this process: (exit code, stdout, stderr); argparse's exit included."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse refuses a flag this way
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "error:" in line]


def assert_one_line_error(code: int, err: str, *needles: str) -> str:
    """A non-zero exit, exactly one error line naming each needle, and no traceback."""
    assert code != 0, f"exit code 0 for a bad input; stderr: {err!r}"
    assert "Traceback" not in err, err
    lines = error_lines(err)
    assert len(lines) == 1, f"expected one error line, got: {err!r}"
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


@contextmanager
def tried(tally: Callable[[str, str, bool], None], measure: str, kind: str) -> Iterator[None]:
    """Record `kind` as ok when the block's assertions all pass, as failed otherwise."""
    ok = False
    try:
        yield
        ok = True
    finally:
        tally(measure, kind, ok)


def topic_doc(topic: str, paragraphs: int = 6, extra: str = "") -> str:
    paras = [
        f"Paragraph {i} explains {topic} in detail. It says that {topic} is studied "
        f"in section {i}, with examples of how {topic} behaves. {extra}".strip()
        for i in range(paragraphs)
    ]
    return f"# About {topic}\n\n" + "\n\n".join(paras) + "\n"


def write_library(root: Path, topics: tuple[str, ...] = TOPICS, paragraphs: int = 6) -> Path:
    """Markdown files on a few topics, one of them in a subfolder."""
    for i, topic in enumerate(topics):
        folder = root / "more" if i % 2 else root
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{topic}.md").write_text(topic_doc(topic, paragraphs), encoding="utf-8")
    return root


def stored(home: Path, collection: str = "books") -> dict[str, dict[str, Any]]:
    """Every chunk of a store: id -> its text, metadata and vector (rounded)."""
    ctx = Context(home=home)
    got = get_collection(open_client(ctx), collection).get(
        include=["documents", "metadatas", "embeddings"]
    )
    rows = {}
    for i, cid in enumerate(got["ids"]):
        vector = got["embeddings"][i] if got["embeddings"] is not None else []
        text, meta = unpacked((got["documents"] or [])[i], (got["metadatas"] or [])[i])
        rows[cid] = {
            "text": text,
            "meta": meta,
            "vector": tuple(round(float(x), 4) for x in vector),
        }
    return rows


def sources(home: Path, collection: str = "books") -> set[str]:
    ctx = Context(home=home)
    collection_ = get_collection(open_client(ctx), collection)
    return {str(r.metadata.get("source")) for r in iter_records(collection_)}


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ask_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small library, ingested once with the real local embedder (for questions)."""
    home = tmp_path_factory.mktemp("ask-home")
    library = write_library(tmp_path_factory.mktemp("ask-lib"))
    assert ingest_path(Context(home=home), library).exit_code == 0
    return home


@pytest.fixture
def loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy between crag's HTTP clients and the loopback fakes."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def _hang_up(handler: BaseHTTPRequestHandler) -> None:
    handler.close_connection = True
    handler.connection.close()


def _slow(seconds: float) -> Respond:
    def respond(handler: BaseHTTPRequestHandler) -> tuple[int, bytes]:
        time.sleep(seconds)
        return 200, b"{}"

    return respond


def _json(status: int, payload: object) -> Respond:
    return lambda handler: (status, json.dumps(payload).encode())


# --- the external source (Tavily) ------------------------------------------------------------

TAVILY_FAULTS: dict[str, Respond | str] = {
    "down (connection refused)": "down",
    "HTTP 500": "error500",
    "HTTP 429 rate limit": "ratelimit",
    "HTTP 401 (key refused)": "badkey",
    "slow (past the timeout)": "slow",
    "malformed JSON": lambda handler: (200, b"<html>this is not JSON"),
    "JSON of the wrong shape": _json(200, {"results": "nothing here"}),
    "results of the wrong types": _json(200, {"results": ["a", 3, None]}),
    "hangs up without an answer": lambda handler: _hang_up(handler),
}


@contextmanager
def _tavily(fault: Respond | str) -> Iterator[str]:
    if fault == "down":
        yield f"http://127.0.0.1:{free_port()}"
    elif isinstance(fault, str):
        mode = "ok" if fault == "badkey" else fault
        key = "tvly-another" if fault == "badkey" else None
        with FakeTavily(mode=mode, slow_s=5.0, api_key=key) as fake:  # type: ignore[arg-type]
            yield fake.base_url
    else:
        with raw_server(fault) as url:
            yield url


@pytest.mark.parametrize("fault", list(TAVILY_FAULTS))
def test_a_failing_external_source_is_reported_and_the_run_goes_on(
    fault: str,
    ask_home: Path,
    loopback: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tally: Any,
) -> None:
    with tried(tally, "fault", f"tavily: {fault}"), _tavily(TAVILY_FAULTS[fault]) as url:
        monkeypatch.setenv("TAVILY_API_KEY", "tvly-test")
        monkeypatch.setenv("CRAG_TAVILY_BASE_URL", url)
        argv = ["ask", OFF_TOPIC, "--home", ask_home, "--no-llm", "--external", "tavily"]
        started = time.monotonic()
        code, out, err = cli(capsys, *argv, "--set", "timeout_s=1", "--json")
        assert time.monotonic() - started < 10  # the timeout holds
        assert code == 0 and "Traceback" not in err, err
        result = json.loads(out)
        assert result["path"][-4:] == ["web_search", "refine", "generate", "verify"]
        error = result["web_error"] or ""
        assert error.startswith("tavily: ") and "\n" not in error, error
        assert result["answered"] is False and result["citations"] == []
        assert "external source failed" in result["answer"]


#: A provider flag and the one line a run without the provider's key must fail with.
MISSING_KEYS = {
    "tavily": (("--no-llm", "--external", "tavily"), "external=tavily needs TAVILY_API_KEY"),
    "openai chat model": (("--chat-model", "openai:gpt-4o-mini"), "needs the OPENAI_API_KEY"),
    "openai judge": (
        ("--chat-model", "extractive", "--grader", "judge", "--set", "judge_model=openai:m"),
        "needs the OPENAI_API_KEY",
    ),
    "openai embeddings": (("--no-llm", "--embeddings", "openai:e"), "needs the OPENAI_API_KEY"),
}


@pytest.mark.parametrize("command", ["ask", "chat"])
@pytest.mark.parametrize("provider", list(MISSING_KEYS))
def test_a_provider_without_its_key_stops_the_run_before_the_first_question(
    provider: str,
    command: str,
    ask_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A missing key is the user's to fix, as a chat model's is: not a refusal, and not
    found out only when a question first reaches the provider (here: a question the
    library answers, which never reaches the web path)."""
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    flags, message = MISSING_KEYS[provider]
    question = [ANSWERABLE] if command == "ask" else []
    code, out, err = cli(capsys, command, *question, "--home", ask_home, "--no-cache", *flags)
    assert code == 2 and out == "", out
    assert_one_line_error(code, err, message)
    assert "retrieve" not in err  # no step ran


def test_ingest_without_the_embedders_key_stops_before_the_first_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The key is the run's to have, not something the first file failed on."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    library = write_library(tmp_path / "lib")
    argv = ["ingest", library, "--home", tmp_path / "home", "--embeddings", "openai:e"]
    code, out, err = cli(capsys, *argv)
    assert code == 2 and out == "", out
    line = assert_one_line_error(code, err, "needs the OPENAI_API_KEY")
    assert line.startswith("crag ingest: error: embeddings"), line


def test_a_grader_failing_on_web_results_is_recorded_not_fatal(
    ask_home: Path, monkeypatch: pytest.MonkeyPatch, tally: Any
) -> None:
    """Moved from tests/unit/test_hardening.py, now through the whole graph."""
    from crag.nodes import web_search as node

    class OneResult:
        name = "one"

        async def asearch(self, queries: list[str], k: int) -> list[dict[str, str]]:
            return [{"id": "w", "text": "Ulaanbaatar is the capital.", "origin": "external"}]

    class Broken:
        name = "broken"

        async def ascore(self, question: str, passages: list[str]) -> list[float]:
            raise RuntimeError("grader exploded")

    with tried(tally, "fault", "grader raises on the web results"):
        monkeypatch.setattr(node, "make_source", lambda ctx, name: OneResult())
        monkeypatch.setattr(node, "make_grader", lambda ctx, library: Broken())
        ctx = Context(home=ask_home, chat_model="extractive", sources="external")
        state = ask(OFF_TOPIC, context=ctx)
        result = summary(state)
        assert state["web_docs"] == []  # ungraded results never reach the answer
        assert result["web_error"] == (
            "grading the results of local failed: RuntimeError: grader exploded"
        )
        assert result["path"][-1] == "verify" and result["answered"] is False


# --- an OpenAI-compatible server for the chat model and the embeddings ------------------------

CHAT_FAULTS: dict[str, Respond | str] = {
    "down (connection refused)": "down",
    "HTTP 500": _json(500, {"error": {"message": "boom", "type": "server_error"}}),
    "HTTP 429 rate limit": _json(429, {"error": {"message": "slow down", "type": "rate"}}),
    "HTTP 401 (key refused)": _json(401, {"error": {"message": "bad key", "type": "auth"}}),
    "a body that is not JSON": lambda handler: (200, b"<html>not json"),
    "no choices in the reply": _json(200, {"id": "x", "object": "chat.completion", "choices": []}),
    "slow (past the timeout)": _slow(2.0),
    "hangs up without an answer": lambda handler: _hang_up(handler),
}


@contextmanager
def _openai(fault: Respond | str) -> Iterator[str]:
    if fault == "down":
        yield f"http://127.0.0.1:{free_port()}/v1"
    else:
        assert not isinstance(fault, str)
        with raw_server(fault) as url:
            yield url + "/v1"


@pytest.mark.parametrize("fault", list(CHAT_FAULTS))
def test_a_failing_chat_model_still_answers_from_the_sources(
    fault: str,
    ask_home: Path,
    loopback: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tally: Any,
) -> None:
    with tried(tally, "fault", f"chat model: {fault}"), _openai(CHAT_FAULTS[fault]) as url:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        started = time.monotonic()
        code, out, err = cli(
            capsys,
            *("ask", ANSWERABLE, "--home", ask_home, "--chat-model", "openai:m"),
            *("--grader", "features", "--external", "none", "--json"),
            *("--set", "timeout_s=0.5" if "slow" in fault else "timeout_s=1"),
        )
        assert time.monotonic() - started < 15
        assert code == 0 and "Traceback" not in err, err
        result = json.loads(out)
        assert result["answered"] is True and result["citations"], result
        fallback = r"\(The language model(?: failed|'s reply could not be read)"
        assert re.match(fallback, result["answer"]), result["answer"]
        assert "dropout" in result["answer"]


def test_a_judge_that_is_down_does_not_turn_answers_into_not_found(
    ask_home: Path, loopback: None, monkeypatch: pytest.MonkeyPatch, tally: Any
) -> None:
    with tried(tally, "fault", "LLM judge down"), _openai("down") as url:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        ctx = Context(
            home=ask_home,
            grader="judge",
            judge_model="openai:judge",
            chat_model="extractive",
            external="none",
            timeout_s=1.0,
            fast_path=False,  # a clear winner would spare the judge altogether
        )
        result = summary(ask(ANSWERABLE, context=ctx))
        assert result["answered"], result["answer"]
        assert "judge gave no usable answer" in result["grader"]  # said, not hidden


def test_an_embeddings_server_failing_at_question_time_is_one_line(
    tmp_path: Path,
    loopback: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tally: Any,
) -> None:
    library = write_library(tmp_path / "lib", TOPICS[:2])
    fake = FakeOpenAI().start()
    try:
        monkeypatch.setenv("OPENAI_API_KEY", fake.api_key)
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        home = tmp_path / "home"
        code, _, err = cli(capsys, "ingest", library, "--home", home, "--embeddings", "openai:e")
        assert code == 0, err
    finally:
        fake.stop()
    ask_argv = ["ask", ANSWERABLE, "--home", home, "--embeddings", "openai:e", "--no-llm"]
    for fault in ("down (connection refused)", "HTTP 500", "a body that is not JSON"):
        with tried(tally, "fault", f"embeddings server at question time: {fault}"):
            with _openai(CHAT_FAULTS[fault]) as url:
                monkeypatch.setenv("OPENAI_BASE_URL", url)
                code, out, err = cli(capsys, *ask_argv, "--set", "timeout_s=1", "--quiet")
            assert_one_line_error(code, err, "embeddings 'openai:e' failed")
            assert out == ""


def test_an_embeddings_server_down_during_ingest_stops_cleanly(
    tmp_path: Path,
    loopback: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tally: Any,
) -> None:
    with tried(tally, "fault", "embeddings server down during ingest"), _openai("down") as url:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        monkeypatch.setenv("CRAG_TIMEOUT_S", "1")
        library = write_library(tmp_path / "lib", TOPICS[:2])
        home = tmp_path / "home"
        code, out, err = cli(capsys, "ingest", library, "--home", home, "--embeddings", "openai:e")
        assert code == 1 and "Traceback" not in err, err
        stopped = [line for line in out.splitlines() if line.startswith("stopped: ")]
        assert len(stopped) == 1 and "embeddings 'openai:e' failed" in stopped[0], out
        assert sources(home) == set()  # nothing half-written


# --- faults during an ingest -------------------------------------------------------------------


@pytest.fixture
def cli_embedder(monkeypatch: pytest.MonkeyPatch) -> Callable[[FakeEmbeddings], None]:
    """Route the CLI's embedder to a given fake, in batches of 2 chunks."""
    monkeypatch.setitem(Ingestor.__init__.__kwdefaults__, "batch_size", 2)

    def use(fake: FakeEmbeddings) -> None:
        monkeypatch.setattr(indexer, "embeddings_for", lambda *a, **k: fake)

    return use


def _ingest(capsys: pytest.CaptureFixture[str], library: Path, home: Path) -> tuple[int, dict, str]:
    code, out, err = cli(
        capsys,
        *("ingest", library, "--home", home, "--json", "-q"),
        *("--chunk-size", "300", "--chunk-overlap", "50"),
    )
    return code, json.loads(out) if out.strip() else {}, err


def _clean(library: Path, home: Path) -> dict[str, dict[str, Any]]:
    ctx = Context(home=home, chunk_size=300, chunk_overlap=50)
    assert ingest_path(ctx, library, embeddings=FakeEmbeddings()).exit_code == 0
    return stored(home)


def test_an_interrupted_ingest_resumes_without_duplicates(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cli_embedder: Callable[[FakeEmbeddings], None],
    tally: Any,
) -> None:
    """Ctrl-C (KeyboardInterrupt) mid-file: exit 130, and the re-run embeds only what is
    missing. Moved from tests/integration/test_ingest.py, now through the CLI."""
    with tried(tally, "fault", "Ctrl-C (KeyboardInterrupt) mid-ingest"):
        library = write_library(tmp_path / "lib")
        clean = _clean(library, tmp_path / "clean")
        # stopped in the first file's second batch (of 2 chunks): its first one written
        first = sorted(
            (r["meta"]["chunk"], r["text"])
            for r in clean.values()
            if r["meta"]["source"] == discover(library).source(discover(library).files[0])
        )
        batch = [t for _, t in first[:2]]
        cli_embedder(FakeEmbeddings(fail_after=len(batch), error=KeyboardInterrupt()))
        code, summary_, _ = _ingest(capsys, library, tmp_path / "home")
        assert code == 130 and summary_["interrupted"] is True
        partial = stored(tmp_path / "home")
        assert 0 < len(partial) < len(clean) and set(partial) <= set(clean)

        resumed = FakeEmbeddings()
        cli_embedder(resumed)
        code, summary_, _ = _ingest(capsys, library, tmp_path / "home")
        assert code == 0 and "resumed" in {f["status"] for f in summary_["files"]}
        assert stored(tmp_path / "home") == clean  # nothing missing, nothing twice
        missing = [r["text"] for cid, r in clean.items() if cid not in partial]
        assert resumed.texts == len(missing)  # only the missing chunks
        code, summary_, _ = _ingest(capsys, library, tmp_path / "home")
        assert summary_["files_unchanged"] == len(TOPICS)


class _Broken(FakeEmbeddings):
    """Fails in one of several ways after `after` texts."""

    def __init__(self, how: str, after: int = 3) -> None:
        super().__init__()
        self.how, self.after = how, after

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = super().embed_documents(texts)
        if self.texts <= self.after:
            return vectors
        if self.how == "raises":
            raise RuntimeError("embedder failed (simulated)")
        if self.how == "too few vectors":
            return vectors[:-1]
        if self.how == "NaN vectors":
            return [[float("nan")] * len(v) for v in vectors]
        return [v[: len(v) // 2] for v in vectors]  # "vectors of another size"


@pytest.mark.parametrize("how", ["raises", "too few vectors", "NaN vectors", "wrong-size vectors"])
def test_an_embedder_failing_mid_ingest_leaves_the_index_as_it_was(
    how: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cli_embedder: Callable[[FakeEmbeddings], None],
    tally: Any,
) -> None:
    """A changed file's new version fails half-way: its old version stays complete, and
    the run stops with one line. Moved from tests/integration/test_ingest.py."""
    with tried(tally, "fault", f"embedder mid-ingest: {how}"):
        library = write_library(tmp_path / "lib")
        home = tmp_path / "home"
        cli_embedder(FakeEmbeddings())
        assert _ingest(capsys, library, home)[0] == 0
        before = stored(home)
        (library / "dropout.md").write_text(topic_doc("something else entirely", 8))
        cli_embedder(_Broken(how))
        code, summary_, err = _ingest(capsys, library, home)
        assert code == 1 and "Traceback" not in err, err
        assert summary_["error"].startswith("dropout.md: "), summary_["error"]
        assert "\n" not in summary_["error"]
        assert stored(home) == before  # the old version of dropout.md is still complete
        cli_embedder(FakeEmbeddings())
        assert _ingest(capsys, library, home)[0] == 0
        assert stored(home) == _clean(library, tmp_path / "clean")


def _of(rows: dict[str, dict[str, Any]], source: str) -> dict[str, dict[str, Any]]:
    return {cid: row for cid, row in rows.items() if row["meta"]["source"] == source}


def test_files_replaced_and_deleted_while_they_are_ingested(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cli_embedder: Callable[[FakeEmbeddings], None],
    tally: Any,
) -> None:
    """While the first file is embedded it is replaced, and a later file is deleted: the
    run indexes the bytes it read (one whole version) and reports the missing file; the
    next run swaps the new version in."""
    library = write_library(tmp_path / "lib")
    before = _clean(library, tmp_path / "clean-before")
    target, doomed = library / "convolution.md", library / "more" / "attention.md"

    class Meddling(FakeEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            if self.calls == 0:  # the first batch of the first file, convolution.md
                new = target.with_suffix(".tmp")
                new.write_text(topic_doc("convolution", 8, "Rewritten."), encoding="utf-8")
                os.replace(new, target)
                doomed.unlink()
            return super().embed_documents(texts)

    with tried(tally, "fault", "file replaced (and another deleted) mid-ingest"):
        home = tmp_path / "home"
        cli_embedder(Meddling())
        code, summary_, err = _ingest(capsys, library, home)
        assert code == 1 and "Traceback" not in err, err
        reasons = {f["source"]: f["reason"] for f in summary_["files"] if f["reason"]}
        assert reasons == {"more/attention.md": "file not found (removed while ingesting?)"}
        got = stored(home)
        assert _of(got, "convolution.md") == _of(before, "convolution.md")  # as it was read
        cli_embedder(FakeEmbeddings())
        code, summary_, _ = _ingest(capsys, library, home)
        assert code == 0
        assert {f["source"]: f["status"] for f in summary_["files"]}["convolution.md"] == "updated"
        assert stored(home) == _clean(library, tmp_path / "clean-after")


def test_a_second_ingest_is_refused_while_one_runs(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cli_embedder: Callable[[FakeEmbeddings], None],
    tally: Any,
) -> None:
    """Two writers at once: the second is refused with one line, the first completes."""
    library = write_library(tmp_path / "lib")
    home = tmp_path / "home"
    embedding, release = threading.Event(), threading.Event()

    class Held(FakeEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            embedding.set()
            release.wait(20)
            return super().embed_documents(texts)

    first: dict[str, Any] = {}
    ctx = Context(home=home, chunk_size=300, chunk_overlap=50)
    writer = threading.Thread(
        target=lambda: first.update(summary=ingest_path(ctx, library, embeddings=Held()))
    )
    with tried(tally, "fault", "concurrent ingests (second writer refused)"):
        writer.start()
        try:
            assert embedding.wait(20)
            second = FakeEmbeddings()
            cli_embedder(second)
            code, _, err = _ingest(capsys, library, home)
        finally:
            release.set()
            writer.join(30)
        assert_one_line_error(code, err, "another `crag ingest`", f"is writing to {home}")
        assert code == 1 and second.calls == 0
        assert first["summary"].exit_code == 0
        assert stored(home) == _clean(library, tmp_path / "clean")


QUESTIONS = (ANSWERABLE, "How does attention behave?", OFF_TOPIC, "Explain convolution.")


def _comparable(state: Any) -> dict[str, Any]:
    result = summary(state)
    result.pop("timings")
    return result


def test_concurrent_questions_give_the_sequential_answers(ask_home: Path, tally: Any) -> None:
    ctx = Context(home=ask_home, chat_model="extractive", external="none")
    sequential = [_comparable(ask(q, context=ctx)) for q in QUESTIONS]
    assert len({r["verdict"] for r in sequential}) > 1  # the questions differ in kind

    async def together() -> list[Any]:
        return await asyncio.gather(*(aask(q, context=ctx) for q in QUESTIONS))

    with tried(tally, "fault", "concurrent questions in one event loop"):
        assert [_comparable(s) for s in asyncio.run(together())] == sequential
    with tried(tally, "fault", "concurrent questions in threads"):
        with ThreadPoolExecutor(len(QUESTIONS)) as pool:
            states = list(pool.map(lambda q: ask(q, context=ctx), QUESTIONS))
        assert [_comparable(s) for s in states] == sequential


def test_questions_while_an_ingest_writes_the_same_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tally: Any
) -> None:
    """A reader during a writer: every answer comes from a consistent library, and the
    ingest completes."""
    from crag.models.embeddings import make_embeddings

    library = write_library(tmp_path / "lib", TOPICS[:2])
    home = tmp_path / "home"
    assert ingest_path(Context(home=home), library).exit_code == 0
    write_library(tmp_path / "lib", TOPICS)  # two more topics to index
    real = make_embeddings("local")
    writing = threading.Event()

    class Slow(FakeEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            writing.set()
            time.sleep(0.15)
            return real.embed_documents(texts)

    monkeypatch.setitem(Ingestor.__init__.__kwdefaults__, "batch_size", 1)
    ingest: dict[str, Any] = {}
    writer = threading.Thread(
        target=lambda: ingest.update(
            summary=ingest_path(Context(home=home), library, embeddings=Slow())
        )
    )
    # toy pages score low by similarity: thresholds low enough to answer from them
    # (what is tested is reading while a writer works, not the grading)
    ctx = Context(home=home, chat_model="extractive", external="none", lower=0.3, upper=0.3)
    with tried(tally, "fault", "questions while an ingest writes the store"):
        writer.start()
        try:
            assert writing.wait(20)
            during = [summary(ask(ANSWERABLE, context=ctx)) for _ in range(3)]
        finally:
            writer.join(60)
        assert ingest["summary"].exit_code == 0
        for result in during:
            assert result["answered"] and result["citations"][0]["source"] == "dropout.md"
        after = summary(ask("Explain convolution.", context=ctx))
        assert after["answered"] and after["citations"][0]["source"] == "convolution.md"


def test_ctrl_c_during_a_question_is_one_line(
    request: pytest.FixtureRequest,
    ask_home: Path,
    loopback: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tally: Any,
) -> None:
    """SIGINT reaches the main thread while the chat model is writing: one line, exit 130."""
    main_thread = threading.main_thread().ident
    assert main_thread is not None
    # Python's own Ctrl-C handler, even where this suite was started in the background
    # (a non-interactive shell's `&` makes its jobs ignore SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))

    def interrupt(handler: BaseHTTPRequestHandler) -> tuple[int, bytes]:
        signal.pthread_kill(main_thread, signal.SIGINT)  # as a terminal's Ctrl-C
        time.sleep(1.5)
        return 500, b"{}"

    with tried(tally, "fault", "Ctrl-C (SIGINT) during a question"), raw_server(interrupt) as url:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
        code, out, err = cli(
            capsys,
            *("ask", ANSWERABLE, "--home", ask_home, "--chat-model", "openai:m"),
            *("--grader", "features", "--external", "none", "--quiet"),
        )
        assert code == 130 and out == "" and "Traceback" not in err
        assert err.strip().splitlines() == ["crag: interrupted"]


# --- hostile bytes on the way to a terminal -----------------------------------------------------

HOSTILE_TEXT = (
    "# Dropout \x1b[31mred\x1b[0m\n\n"
    "Dropout randomly zeroes activations during training \x1b]0;pwned\x07 to reduce "
    "overfitting.\x1b[2J Dropout is a regularisation method \x9b31m used in deep networks. "
    "Dropout keeps a random subset of units at each step.\x08\x08\n"
)


@pytest.fixture(scope="module")
def hostile_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    library = tmp_path_factory.mktemp("hostile-lib")
    (library / "evil\x1b[2J\x1b]0;title\x07.md").write_text(HOSTILE_TEXT, encoding="utf-8")
    (library / "two\nlines.md").write_text(topic_doc("attention"), encoding="utf-8")
    return library, tmp_path_factory.mktemp("hostile-home")


def _no_raw_controls(*texts: str) -> None:
    for text in texts:
        found = RAW_CONTROL.findall(text)
        assert not found, f"raw control characters {found!r} in {text!r}"


def test_escape_sequences_in_documents_and_file_names_are_escaped(
    hostile_home: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tally: Any
) -> None:
    library, home = hostile_home
    with tried(tally, "fault", "terminal escapes in file names (ingest progress)"):
        code, out, err = cli(capsys, "ingest", library, "--home", home)
        assert code == 0, err
        _no_raw_controls(out, err)
        assert "evil\\x1b[2J\\x1b]0;title\\x07.md: indexed" in err
        assert "two\\x0alines.md: indexed" in err  # one line per file
    with tried(tally, "fault", "terminal escapes in document text (answer)"):
        argv = ["ask", ANSWERABLE, "--home", home, "--no-llm", "--external", "none"]
        code, out, err = cli(capsys, *argv)
        assert code == 0, err
        _no_raw_controls(out, err)
        assert "\\x1b" in out and "Dropout randomly zeroes" in out
        code, out, err = cli(capsys, *argv, "--json")
        result = json.loads(out)  # JSON escapes the C0 controls itself, text kept exact
        assert "\x1b]0;pwned\x07" in result["answer"]
        assert not re.search(r"[\x00-\x09\x0b-\x1f]", out)


def test_json_output_escapes_c1_controls_too(
    hostile_home: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tally: Any
) -> None:
    library, home = hostile_home
    with tried(tally, "fault", "C1 control characters in document text (--json)"):
        if not (home / "chroma").exists():
            assert cli(capsys, "ingest", library, "--home", home, "-q")[0] == 0
        argv = ["ask", ANSWERABLE, "--home", home, "--no-llm", "--external", "none", "--json"]
        code, out, err = cli(capsys, *argv)
        assert code == 0 and "\x9b" in json.loads(out)["answer"]
        _no_raw_controls(out, err)


def test_a_file_name_with_a_line_break_stays_on_its_line_in_answers(
    hostile_home: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tally: Any
) -> None:
    library, home = hostile_home
    with tried(tally, "fault", "line break in a file name (answer's sources)"):
        if not (home / "chroma").exists():
            assert cli(capsys, "ingest", library, "--home", home, "-q")[0] == 0
        argv = ["ask", "How does attention behave?", "--home", home, "--no-llm"]
        code, out, _ = cli(capsys, *argv, "--external", "none", "--quiet")
        assert code == 0 and "two" in out
        assert not any(line.startswith("lines.md") for line in out.splitlines()), out


def test_output_to_a_closed_pipe_is_not_a_traceback(ask_home: Path, tally: Any) -> None:
    with tried(tally, "fault", "output to a closed pipe"):
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "crag.cli.main", "ask", ANSWERABLE),
                *("--home", str(ask_home), "--no-llm", "--external", "none", "--quiet"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader is gone before crag writes a byte
        err = proc.stderr.read()
        proc.wait(timeout=60)
        assert "Traceback" not in err and "Exception ignored" not in err, err
        assert len(err.splitlines()) <= 1, err  # at most one line saying so
