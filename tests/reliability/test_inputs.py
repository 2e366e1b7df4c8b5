"""Bad input gets one line that says what is wrong, a non-zero exit and no traceback
(without -v), and nothing is lost: questions, flags, environment values, settings.json,
trained-grader files, ingest inputs and the lab's question and pair files.

Every case records its kind under "bad input" in the reliability tally. Store faults
(a damaged index, bad collection names, a --home that is a file ...) are in
test_store_faults.py.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeEmbeddings, build_pdf
from test_faults import (
    ANSWERABLE,
    RAW_CONTROL,
    assert_one_line_error,
    cli,
    error_lines,
    sources,
    stored,
    topic_doc,
    tried,
    write_library,
)

from crag.api import ask
from crag.cli.main import main
from crag.context import Context
from crag.graph import graph
from crag.ingest import indexer, loaders
from crag.ingest.indexer import ingest_path
from crag_lab.graders.features import FEATURES


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small library ingested with the real local embedder."""
    home = tmp_path_factory.mktemp("inputs-home")
    library = write_library(tmp_path_factory.mktemp("inputs-lib"))
    assert ingest_path(Context(home=home), library).exit_code == 0
    return home


def _ask(home: Path, *flags: str) -> list[str | Path]:
    return [
        "ask",
        ANSWERABLE,
        "--home",
        home,
        "--chat-model",
        "extractive",
        "--external",
        "none",
        *flags,
    ]


# --- the question ---------------------------------------------------------------------------

BAD_QUESTIONS = {
    "question: empty": ("", "the question is empty"),
    "question: whitespace only": (" \n\t ", "the question is empty"),
    "question: over max_question_chars": ("x" * 5000, "5000 characters long; the limit is 4000"),
    "question: undecodable bytes from the command line": ("caf\udce9?", "not valid UTF-8"),
}


@pytest.mark.parametrize("kind", list(BAD_QUESTIONS))
def test_a_bad_question_on_the_command_line(
    kind: str, home: Path, capsys: pytest.CaptureFixture[str], tally: Any
) -> None:
    question, message = BAD_QUESTIONS[kind]
    with tried(tally, "bad input", kind):
        code, out, err = cli(capsys, "ask", question, *_ask(home)[2:])
        assert code == 2 and out == ""
        assert_one_line_error(code, err, "crag ask: error: ", message)
        assert len(err.splitlines()) == 1  # nothing before it: a bad question is not echoed


@pytest.mark.parametrize(
    ("kind", "question", "message"),
    [
        ("question via the API: None", None, "must be text, got NoneType"),
        ("question via the API: a number", 42, "must be text, got int"),
        ("question via the API: bytes", b"What is dropout?", "must be text, got bytes"),
        ("question via the API: a lone surrogate", "caf\ud800?", "not valid UTF-8"),
        ("question via the API: empty", "", "the question is empty"),
    ],
)
def test_a_bad_question_through_the_api(
    kind: str, question: object, message: str, home: Path, tally: Any
) -> None:
    with tried(tally, "bad input", kind), pytest.raises(ValueError, match=message) as info:
        ask(question, context=Context(home=home, chat_model="extractive"))  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_a_good_question_is_only_stripped(home: Path) -> None:
    state = ask("  What is dropout?\n", context=Context(home=home, chat_model="extractive"))
    assert state["question"] == "What is dropout?"


def test_a_bad_question_in_the_graph_input(home: Path, tally: Any) -> None:
    """What `langgraph dev` hands the graph: no API in front of it."""
    ctx = Context(home=home, chat_model="extractive", external="none")
    for kind, state in [
        ("graph input: question None", {"question": None}),
        ("graph input: question too long", {"question": "y" * 4001}),
    ]:
        with tried(tally, "bad input", kind), pytest.raises(ValueError, match="question"):
            graph.invoke(state, context=ctx)  # type: ignore[arg-type]


def test_control_characters_in_a_question_never_reach_the_terminal(
    home: Path, capsys: pytest.CaptureFixture[str], tally: Any
) -> None:
    with tried(tally, "bad input", "question: control characters (escaped, then answered)"):
        question = "What is\x00 dropout\x1b[2J\x1b]0;pwned\x07\x9b?"
        code, out, err = cli(capsys, "ask", question, *_ask(home)[2:], "-v")
        assert code == 0, err
        assert not RAW_CONTROL.findall(out + err)
        assert "question: What is\\x00 dropout\\x1b[2J" in err
        assert "dropout.md" in out  # the chunks retrieved, with -v


# --- flags, environment values and settings.json ---------------------------------------------

BAD_FLAGS = {
    "flag: --k 0": (["--k", "0"], "k=0 (from argument): must be >= 1"),
    "flag: --k abc": (["--k", "abc"], "k='abc' (from argument): expected an integer"),
    "flag: --set web_k=0": (["--set", "web_k=0"], "web_k=0 (from argument): must be >= 1"),
    "flag: --set max_strips=-1": (["--set", "max_strips=-1"], "max_strips=-1 (from argument)"),
    "flag: --set upper=2": (["--set", "upper=2"], "upper=2.0 (from argument): must be a number"),
    "flag: --set upper=inf": (["--set", "upper=inf"], "upper=inf"),
    "flag: --set upper=abc": (["--set", "upper=abc"], "upper='abc' (from argument): expected a"),
    "flag: --set strip_threshold=NaN": (["--set", "strip_threshold=NaN"], "strip_threshold=nan"),
    "flag: --set strip_threshold=-1": (["--set", "strip_threshold=-1"], "strip_threshold=-1.0"),
    "flag: --set timeout_s=-5": (["--set", "timeout_s=-5"], "timeout_s=-5.0 (from argument)"),
    "flag: --set search.timeout_s=nan": (["--set", "search.timeout_s=nan"], "timeout_s=nan"),
    "flag: --set lower above upper": (
        ["--set", "lower=0.9", "--set", "upper=0.1"],
        "must not exceed upper",
    ),
    "flag: --set without a value": (["--set", "upper"], "--set: expected NAME=VALUE"),
    "flag: --set an unknown knob": (["--set", "uper=0.5"], "--set: unknown knob 'uper'"),
    "flag: --set an unknown group": (["--set", "grade.upper=0.5"], "unknown knob 'grade.upper'"),
    "flag: unknown --grader": (["--grader", "judgee"], "grader='judgee': unknown grader"),
    "flag: unknown --external": (["--external", "bing"], "external='bing': unknown external"),
    "flag: unknown --chat-model": (["--chat-model", "gpt"], "chat_model='gpt': unknown chat model"),
    "flag: --chat-model openai: without a model": (["--chat-model", "openai:"], "'openai:'"),
    "flag: unknown judge_model": (["--set", "judge_model=x"], "judge_model='x': unknown chat"),
    "flag: unknown --embeddings": (["--embeddings", "bert"], "embeddings='bert': unknown"),
    "flag: an unknown flag": (["--bogus"], "unrecognized arguments: --bogus (see crag ask --help)"),
    "flag: a removed flag": (["--upper", "0.5"], "unrecognized arguments: --upper"),
    "flag: --tenant with a slash": (["--tenant", "acme/x"], "tenant='acme/x' (from argument)"),
    "flag: --tenant empty": (["--tenant", ""], "tenant='' (from argument)"),
    "flag: --tenant that never ingested": (
        ["--tenant", "nobody"],
        "tenant 'nobody' has no library in collection 'books' (its tenants: default): use one",
    ),
    "flag: unknown --chat-model lists every name": (["--chat-model", "gpt"], "extractive"),
    "flag: --set cache_threshold=1.5": (["--set", "cache_threshold=1.5"], "cache_threshold=1.5"),
    "flag: --set cache.size=0": (["--set", "cache.size=0"], "cache_size=0 (from argument)"),
    "flag: --grader cross-encoder without a model": (
        ["--grader", "cross-encoder"],
        "grader=cross-encoder needs a model",
    ),
    "flag: --set sql_path to no file": (
        ["--set", "sql_path=/nonexistent/db.sqlite"],
        "sql_path='/nonexistent/db.sqlite': no database there",
    ),
    "flag: --set cache_min_confidence=nan": (
        ["--set", "cache_min_confidence=nan"],
        "cache_min_confidence=nan",
    ),
}


@pytest.mark.parametrize("kind", list(BAD_FLAGS))
def test_a_bad_flag_value(
    kind: str, home: Path, capsys: pytest.CaptureFixture[str], tally: Any
) -> None:
    flags, message = BAD_FLAGS[kind]
    with tried(tally, "bad input", kind):
        code, out, err = cli(capsys, *_ask(home, "--quiet", *flags))
        assert code == 2 and out == ""
        assert_one_line_error(code, err, message)
        assert len(err.strip().splitlines()) == 1, err  # no usage block: --help has it


def test_with_v_the_same_error_shows_its_traceback(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "-v", *_ask(home, "--quiet", "--set", "timeout_s=-5"))
    assert (
        code == 2
        and "Traceback" in err
        and err.rstrip().endswith("must be a positive number of seconds")
    )


BAD_ENV = {
    "env: CRAG_K=abc": ("CRAG_K", "abc", "k='abc' (from CRAG_K): expected an integer"),
    "env: CRAG_UPPER=NaN": ("CRAG_UPPER", "NaN", "upper=nan (from CRAG_UPPER)"),
    "env: CRAG_REFINE=maybe": ("CRAG_REFINE", "maybe", "(from CRAG_REFINE): expected a boolean"),
    "env: CRAG_MAX_QUESTION_CHARS=0": ("CRAG_MAX_QUESTION_CHARS", "0", "max_question_chars=0"),
    "env: CRAG_STRIP_SENTENCES=9": ("CRAG_STRIP_SENTENCES", "9", "strip_sentences=9"),
    "env: CRAG_GRADER=judgee": ("CRAG_GRADER", "judgee", "grader='judgee' (from CRAG_GRADER)"),
    "env: CRAG_TIMEOUT_S=-1": ("CRAG_TIMEOUT_S", "-1", "timeout_s=-1.0 (from CRAG_TIMEOUT_S)"),
    "env: CRAG_TENANT=../x": ("CRAG_TENANT", "../x", "tenant='../x' (from CRAG_TENANT)"),
    "env: CRAG_CACHE=sometimes": ("CRAG_CACHE", "sometimes", "(from CRAG_CACHE): expected a"),
    "env: CRAG_CACHE_SIZE=0": ("CRAG_CACHE_SIZE", "0", "cache_size=0 (from CRAG_CACHE_SIZE)"),
}


@pytest.mark.parametrize("kind", list(BAD_ENV))
def test_a_bad_environment_value(
    kind: str,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tally: Any,
) -> None:
    name, value, message = BAD_ENV[kind]
    with tried(tally, "bad input", kind):
        monkeypatch.setenv(name, value)
        code, _, err = cli(capsys, *_ask(home, "--quiet"))
        assert_one_line_error(code, err, message)
        with pytest.raises(ValueError, match=name):
            ask(ANSWERABLE, context=Context(home=home, chat_model="extractive"))


BAD_SETTINGS: dict[str, tuple[str | bytes, str]] = {
    "settings.json: not JSON": ("{not json", "unreadable settings"),
    "settings.json: not UTF-8": (b'{"k": "\xff"}', "unreadable settings"),
    "settings.json: a number as text": ('{"upper": "high"}', "upper='high' (from "),
    "settings.json: a boolean for a number": ('{"upper": true}', "upper=True (from "),
    "settings.json: k of -1": ('{"k": -1}', "k=-1 (from "),
    "settings.json: a number for a URL": ('{"chroma_url": 12345}', "chroma_url=12345 (from "),
}


@pytest.mark.parametrize("kind", list(BAD_SETTINGS))
def test_a_bad_settings_file_names_itself(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], tally: Any
) -> None:
    content, message = BAD_SETTINGS[kind]
    path = tmp_path / "settings.json"
    with tried(tally, "bad input", kind):
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        code, _, err = cli(capsys, "ask", ANSWERABLE, "--home", tmp_path, "--quiet")
        line = assert_one_line_error(code, err, message)
        assert str(path) in line  # the origin: which file to fix
        assert path.read_bytes() == (content if isinstance(content, bytes) else content.encode())


def test_an_unknown_knob_in_a_settings_file_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An older crag may have saved a knob this one no longer has: the run goes on, and
    the warning names the file and the knob (a typo is not lost without notice)."""
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"uper": 0.7, "lower": 0.2}))
    with caplog.at_level(logging.WARNING, logger="crag.context"):
        ctx = Context(home=tmp_path)
        Context(home=tmp_path)
    assert ctx.grading.lower == 0.2 and ctx.grading.upper == Context().grading.upper
    warned = [r.getMessage() for r in caplog.records if "uper" in r.getMessage()]
    assert len(warned) == 1 and str(path) in warned[0] and "unknown knob 'uper'" in warned[0]


def test_the_settings_of_another_home_are_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad settings.json in the working folder's .crag is not the run's when --home
    names another home: it neither fails the run nor warns."""
    (tmp_path / ".crag").mkdir()
    (tmp_path / ".crag" / "settings.json").write_text('{"upper": "abc", "uper": 1}')
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "settings.json").write_text('{"upper": 0.7}')
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "config", "--home", "other", "--json")
    assert code == 0 and err == ""
    assert json.loads(out)["grading"]["upper"]["value"] == 0.7
    code, _, err = cli(capsys, "config")  # the working folder's own home: its errors
    assert_one_line_error(code, err, "upper='abc'")


def test_a_chat_whose_questions_fail_exits_non_zero(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each failing question prints its error and the chat goes on; a script still learns."""
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{'x' * 50}\n{ANSWERABLE}\n"))
    argv = _ask(home, "--set", "max_question_chars=40")[2:]  # the flags, not the question
    code, out, err = cli(capsys, "chat", *argv)
    assert code == 2 and "Traceback" not in err
    assert len(error_lines(err)) == 1 and "max_question_chars" in error_lines(err)[0]
    assert "sources:" in out or "could not find" in out  # the second question was answered
    # the resume line names the home given, or it would resume in another one
    assert "(resume with: crag chat --thread " in err and f"--home {home}" in err


def test_a_missing_external_collection_is_said_once_before_the_question(
    home: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    argv = [a if a != "none" else "local" for a in _ask(home)]  # the default external
    with caplog.at_level(logging.WARNING, logger="crag"):
        code, out, _ = cli(capsys, *argv)
    assert code == 0 and out
    (warning,) = [r.getMessage() for r in caplog.records if "does not exist" in r.getMessage()]
    assert "--collection external" in warning and f"--home {home}" in warning
    assert "external=none" in warning
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="crag"):
        assert cli(capsys, *_ask(home))[0] == 0  # external=none: nothing to say
    assert not [r for r in caplog.records if "does not exist" in r.getMessage()]


def test_a_settings_file_that_is_not_an_object_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tally: Any
) -> None:
    with tried(tally, "bad input", "settings.json: a list, not an object"):
        (tmp_path / "settings.json").write_text("[1, 2]")
        code, _, err = cli(capsys, "ask", ANSWERABLE, "--home", tmp_path, "--quiet")
        assert_one_line_error(code, err, str(tmp_path / "settings.json"))


# --- trained-grader files: ignored with a warning, never a crash -----------------------------


def _model(**changes: Any) -> dict[str, Any]:
    model = {"features": list(FEATURES), "weights": [1.0] * len(FEATURES), "bias": 0.0}
    return model | changes


BAD_GRADERS: dict[str, str] = {
    "trained grader: NaN bias": json.dumps({"version": 1, "model": _model(bias=math.nan)}),
    "trained grader: infinite bias": json.dumps({"version": 1, "model": _model(bias=math.inf)}),
    "trained grader: weights as text": json.dumps(
        {"version": 1, "model": _model(weights=["NaN"] * len(FEATURES))}
    ),
    "trained grader: too few weights": json.dumps({"version": 1, "model": _model(weights=[1.0])}),
    "trained grader: another feature list": json.dumps(
        {"version": 1, "model": _model(features=["cos", "bm25"])}
    ),
    "trained grader: model is a list": json.dumps({"version": 1, "model": []}),
    "trained grader: file is []": "[]",
    'trained grader: file is {"model": []}': '{"model": []}',
    "trained grader: file is null": "null",
    "trained grader: file is a string": '"text"',
    "trained grader: not JSON": '{"version": 1, "model": {',
    "trained grader: another format version": json.dumps({"version": 99, "model": _model()}),
}


@pytest.mark.parametrize("kind", list(BAD_GRADERS))
def test_an_unusable_trained_grader_is_ignored_with_a_warning(
    kind: str,
    home: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    tally: Any,
) -> None:
    """Moved from tests/unit/test_hardening.py, now through `crag ask`."""
    path = home / "grader" / "grader.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(BAD_GRADERS[kind])
    try:
        with tried(tally, "bad input", kind), caplog.at_level(logging.WARNING):
            code, out, err = cli(capsys, *_ask(home, "--grader", "auto", "--json"))
            assert code == 0 and "Traceback" not in err, err
            result = json.loads(out)
            assert result["grader"] == "similarity" and result["answered"]
            assert "ignoring unusable trained grader" in caplog.text
            caplog.clear()
            # asked for by name, the same file is a one-line error instead
            code, _, err = cli(capsys, *_ask(home, "--grader", "trained", "--quiet"))
            assert_one_line_error(code, err, "unusable trained grader")
    finally:
        path.unlink()


# --- ingest inputs ------------------------------------------------------------------------------


@pytest.fixture
def fake_model(monkeypatch: pytest.MonkeyPatch) -> FakeEmbeddings:
    """Route the CLI's `embeddings_for` to one shared fake."""
    fake = FakeEmbeddings()
    monkeypatch.setattr(indexer, "embeddings_for", lambda *a, **k: fake)
    return fake


def _pdf_library(root: Path) -> Path:
    write_library(root, ("dropout", "attention"))
    (root / "notes.txt").write_text(topic_doc("kernels").replace("# ", ""), encoding="utf-8")
    (root / "book.pdf").write_bytes(
        build_pdf([topic_doc("convolution", 3)[20:], topic_doc("recurrence", 3)[20:]])
    )
    return root


def test_bad_files_are_reported_one_line_each_and_the_rest_ingested(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_model: FakeEmbeddings,
    tally: Any,
) -> None:
    """Moved from tests/integration/test_ingest.py (with the link and name cases added)."""
    library = _pdf_library(tmp_path / "lib")
    home = tmp_path / "home"
    assert cli(capsys, "ingest", library, "--home", home)[0] == 0
    before_book = {c for c, m in _rows(home).items() if m["source"] == "book.pdf"}

    # book.pdf (indexed above) turns corrupt; new bad files appear next to good ones
    (library / "book.pdf").write_bytes(build_pdf(["x " * 300])[:350])
    (library / "empty.pdf").write_bytes(b"")
    (library / "fake.pdf").write_text("just text with a .pdf name", encoding="utf-8")
    from pypdf import PdfReader, PdfWriter

    locked = PdfWriter(clone_from=PdfReader(io.BytesIO(build_pdf(["Secret. " * 30]))))
    locked.encrypt("pw", algorithm="AES-256")
    with open(library / "locked.pdf", "wb") as fh:
        locked.write(fh)
    blank = PdfWriter()
    blank.add_blank_page(612, 792)
    with open(library / "scan.pdf", "wb") as fh:
        blank.write(fh)
    (library / "secret.md").write_text("# Secret\n\nhidden words\n", encoding="utf-8")
    (library / "binary.txt").write_bytes(b"\x00\x01\x02 not text" * 10)
    (library / "comments.md").write_text("<!-- only a comment -->\n\n", encoding="utf-8")
    (library / "gone.pdf").symlink_to(library / "missing.pdf")
    (library / "loop1.md").symlink_to(library / "loop2.md")
    (library / "loop2.md").symlink_to(library / "loop1.md")
    (library / "new.md").write_text(topic_doc("transformers"), encoding="utf-8")
    (library / os.fsdecode(b"bad_\xff.md")).write_text(topic_doc("names"), encoding="utf-8")

    real_read = loaders._read_raw

    def read(path: Path) -> bytes:
        if path.name == "secret.md":
            raise PermissionError(13, "Permission denied", str(path))
        return real_read(path)

    monkeypatch.setattr(loaders, "_read_raw", read)
    code, out, err = cli(capsys, "ingest", library, "--home", home)
    expected = {
        "book.pdf": ("ingest: a corrupt PDF", "corrupt PDF"),
        "empty.pdf": ("ingest: an empty PDF (0 bytes)", "empty file (0 bytes)"),
        "fake.pdf": ("ingest: a file that is not a PDF", "not a PDF"),
        "locked.pdf": ("ingest: an encrypted PDF", "encrypted PDF"),
        "scan.pdf": ("ingest: a PDF with no text", "no extractable text"),
        "secret.md": ("ingest: an unreadable file", "permission denied"),
        "binary.txt": ("ingest: a binary file named .txt", "binary file, not text"),
        "comments.md": ("ingest: markdown with only comments", "no text to index"),
        "gone.pdf": ("ingest: a dangling symbolic link", "broken symbolic link"),
        "loop1.md": ("ingest: a symbolic link loop", "broken symbolic link"),
        "loop2.md": ("ingest: a symbolic link loop", "broken symbolic link"),
        "bad_\ufffd.md": ("ingest: a file name that is not UTF-8", "not valid UTF-8"),
    }
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    for name, (kind, reason) in expected.items():
        with tried(tally, "bad input", kind):
            assert code == 1 and "Traceback" not in err
            mine = [line for line in errors if line.startswith(f"error: {name}: ")]
            assert len(mine) == 1 and reason in mine[0], (name, errors)
    assert len(errors) == len(expected), err
    assert f"1 file(s) indexed, 3 unchanged, {len(expected)} failed" in out
    rows = _rows(home)
    assert any(m["source"] == "new.md" for m in rows.values())
    assert {c for c, m in rows.items() if m["source"] == "book.pdf"} == before_book  # untouched


def _rows(home: Path) -> dict[str, dict[str, Any]]:
    return {cid: row["meta"] for cid, row in stored(home).items()}


@pytest.mark.parametrize(
    ("kind", "argv", "code", "message"),
    [
        ("ingest: a missing folder", ["ingest", "{tmp}/nope"], 2, "no such file or folder"),
        ("ingest: a folder with no documents", ["ingest", "{tmp}/empty_dir"], 1, "no documents"),
        ("ingest: an unsupported file", ["ingest", "{tmp}/doc.docx"], 2, "unsupported file type"),
        ("ingest: --prune with one file", ["ingest", "{tmp}/one.md", "--prune"], 2, "--prune"),
        (
            "ingest: --rebuild with one file",
            ["ingest", "{tmp}/one.md", "--rebuild"],
            2,
            "--rebuild needs a folder",
        ),
        (
            "demo: a samples folder without questions",
            ["demo", "--samples", "{tmp}/empty_dir", "--no-llm"],
            2,
            "empty_dir holds no questions.jsonl",
        ),
        (
            "ingest: chunk_overlap >= chunk_size",
            ["ingest", "{tmp}/one.md", "--chunk-size", "300", "--chunk-overlap", "300"],
            2,
            "chunk_overlap=300 (from argument): must be smaller than chunk_size=300",
        ),
        (
            "ingest: --chunk-size below 100",
            ["ingest", "{tmp}/one.md", "--chunk-size", "10"],
            2,
            "chunk_size=10 (from argument): must be >= 100",
        ),
        (
            "ingest: --chunk-overlap -1",
            ["ingest", "{tmp}/one.md", "--chunk-overlap", "-1"],
            2,
            "chunk_overlap=-1 (from argument): must be >= 0",
        ),
    ],
)
def test_ingest_usage_errors(
    kind: str,
    argv: list[str],
    code: int,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fake_model: FakeEmbeddings,
    tally: Any,
) -> None:
    """Moved from tests/integration/test_ingest.py (test_cli_usage_errors and
    test_cli_rejects_tiny_chunk_size), now through `main`."""
    (tmp_path / "empty_dir").mkdir()
    (tmp_path / "doc.docx").write_bytes(b"PK")
    (tmp_path / "one.md").write_text("# One\n\nSome words here for a chunk.\n", encoding="utf-8")
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv] + ["--home", str(tmp_path / "h")]
    with tried(tally, "bad input", kind):
        got, out, err = cli(capsys, *args)
        assert got == code and out == ""
        assert_one_line_error(got, err, message)
        assert fake_model.calls == 0


def test_a_huge_line_and_odd_file_names_are_ingested(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_model: FakeEmbeddings, tally: Any
) -> None:
    library = tmp_path / "lib"
    library.mkdir()
    (library / "huge.txt").write_text("tok " * 50_000, encoding="utf-8")  # 200 kB, one line
    (library / "nospace.txt").write_text("z" * 100_000, encoding="utf-8")
    (library / "new\nline \x1b[31m.md").write_text(topic_doc("names"), encoding="utf-8")
    (library / "latin1.md").write_bytes("# Caf\xe9\n\nUn caf\xe9 cr\xe8me.".encode("cp1252"))
    home = tmp_path / "home"
    with tried(tally, "bad input", "ingest: a 200 kB line, with and without spaces"):
        code, out, err = cli(capsys, "ingest", library, "--home", home)
        assert code == 0 and "Traceback" not in err, err
        assert "4 file(s) indexed" in out
        assert {"huge.txt", "nospace.txt"} <= sources(home)
        chunks = [m for m in _rows(home).values() if m["source"] == "nospace.txt"]
        assert len(chunks) >= 100_000 // 900
    with tried(tally, "bad input", "ingest: a file name with a line break and an escape"):
        assert "new\nline \x1b[31m.md" in sources(home)
        assert "new\\x0aline \\x1b[31m.md: indexed" in err
        assert not RAW_CONTROL.findall(err.replace("\r\x1b[2K", ""))
    with tried(tally, "bad input", "ingest: text that is not UTF-8 (a warning, then indexed)"):
        assert "warning: latin1.md: not valid UTF-8; decoded as Windows-1252" in err
        assert "latin1.md" in sources(home)


# --- the lab: questions and pairs files -----------------------------------------------------


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _pairs(n: int = 6) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        question = f"What does dropout do, case {i}?"
        rows += [
            {
                "qid": f"q{i}",
                "question": question,
                "relevant": True,
                "passage": topic_doc("dropout"),
            },
            {
                "qid": f"q{i}",
                "question": question,
                "relevant": False,
                "passage": topic_doc("attention"),
            },
        ]
    return rows


@pytest.fixture
def lab_files(tmp_path: Path) -> dict[str, Path]:
    question = {"id": "a", "question": ANSWERABLE, "category": "internal"}
    files = {
        "missing": tmp_path / "nope.jsonl",
        "folder": tmp_path,
        "not JSON": tmp_path / "garbage.jsonl",
        "empty": tmp_path / "empty.jsonl",
        "not UTF-8": tmp_path / "latin1.jsonl",
        "a list per line": tmp_path / "lists.jsonl",
        "unknown category": _jsonl(
            tmp_path / "category.jsonl",
            [question | {"category": "x", "expected_verdict": "correct"}],
        ),
        "no expected verdict": _jsonl(tmp_path / "verdict.jsonl", [question]),
        "answers as text": _jsonl(
            tmp_path / "answers.jsonl",
            [question | {"expected_verdict": "correct", "answers": "Zanzibar-77"}],
        ),
        "relevant as text": _jsonl(
            tmp_path / "relevant.jsonl", [{"question": "q", "passage": "p", "relevant": "yes"}]
        ),
        "pairs": _jsonl(tmp_path / "pairs.jsonl", _pairs()),
    }
    files["not JSON"].write_text("this is not JSON\n")
    files["empty"].write_text("\n\n")
    files["not UTF-8"].write_bytes(b'{"id": "caf\xe9"}\n')
    files["a list per line"].write_text("[1, 2]\n")
    return files


LAB_CASES = {
    "eval: a missing questions file": (["eval", "missing"], "nope.jsonl: no such file"),
    "eval: a folder for the questions file": (["eval", "folder"], "is a folder"),
    "eval: a questions file that is not JSON": (["eval", "not JSON"], "garbage.jsonl:1: not JSON"),
    "eval: an unknown category": (["eval", "unknown category"], "unknown category 'x'"),
    "eval: answers as one string": (
        ["eval", "answers as text"],
        "answers.jsonl:1: 'answers' must be a list of strings",
    ),
    "eval: an unknown --systems name": (
        ["eval", "pairs", "--systems", "crag,magic"],
        "unknown system(s) ['magic']",
    ),
    "eval: --grid-step 0": (["eval", "pairs", "--grid-step", "0"], "--grid-step: must be in"),
    "eval: --ingest with a questions file": (
        ["eval", "pairs", "--ingest"],
        "--ingest is for library folders",
    ),
    "eval: --pairs with library folders": (
        ["eval", str(Path(__file__).resolve().parents[2] / "samples"), "--pairs", "pairs"],
        "--pairs and --home are for a questions file",
    ),
    "eval: an unknown --graders name, before any question": (
        ["eval", "unknown category", "--graders", "bogus"],
        "grader='bogus': unknown grader",
    ),
    "eval: --graders judge without a model": (
        ["eval", "unknown category", "--graders", "judge"],
        "grader=judge needs a chat model",
    ),
    "tune: a missing questions file": (["tune", "missing"], "nope.jsonl: no such file"),
    "tune: an empty questions file": (["tune", "empty"], "empty.jsonl: no records"),
    "tune: a questions file that is not UTF-8": (["tune", "not UTF-8"], ":1: not UTF-8 text"),
    "tune: a question with no expected verdict": (
        ["tune", "no expected verdict"],
        "missing or empty 'expected_verdict'",
    ),
    "tune: --strip-step nan": (["tune", "pairs", "--strip-step", "nan"], "--strip-step: must be"),
    "train-grader: a missing pairs file": (
        ["train-grader", "--pairs", "missing"],
        "nope.jsonl: no such file",
    ),
    "train-grader: a line that is not an object": (
        ["train-grader", "--pairs", "a list per line"],
        "lists.jsonl:1: expected a JSON object",
    ),
    "train-grader: 'relevant' as text": (
        ["train-grader", "--pairs", "relevant as text"],
        "'relevant' must be true or false",
    ),
    "train-grader: no pairs at all": (["train-grader"], "no training pairs"),
    "train-grader: --cv 1": (["train-grader", "--pairs", "pairs", "--cv", "1"], "--cv: use 0"),
    "train-grader: --cv -1": (["train-grader", "--pairs", "pairs", "--cv", "-1"], "--cv: must be"),
    "train-grader: --negatives -3": (
        ["train-grader", "--pairs", "pairs", "--negatives", "-3"],
        "--negatives: must be at least 0",
    ),
}


@pytest.mark.parametrize("kind", list(LAB_CASES))
def test_a_bad_lab_input(
    kind: str,
    lab_files: dict[str, Path],
    home: Path,
    capsys: pytest.CaptureFixture[str],
    tally: Any,
) -> None:
    argv, message = LAB_CASES[kind]
    args = [str(lab_files.get(a, a)) for a in argv]
    with tried(tally, "bad input", kind):
        quiet = [] if argv[0] == "train-grader" else ["--quiet"]
        code, _, err = cli(capsys, *args, "--home", home, "--no-llm", *quiet)
        assert_one_line_error(code, err, message)
        assert not (home / "grader" / "grader.json").exists()
        assert not (home / "settings.json").exists()


def test_train_grader_without_cross_validation_saves_nothing_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tally: Any
) -> None:
    pairs = _jsonl(tmp_path / "pairs.jsonl", _pairs())
    home = tmp_path / "home"
    argv = ["train-grader", "--pairs", pairs, "--cv", "0", "--home", home, "--no-llm"]
    with tried(tally, "bad input", "train-grader: --cv 0 without --force (nothing saved)"):
        code, out, err = cli(capsys, *argv)
        assert code == 0 and "Traceback" not in err
        said = [line for line in out.splitlines() if line.startswith("not saved: ")]
        assert len(said) == 1 and "--force saves it anyway" in said[0]
        assert not (home / "grader" / "grader.json").exists()
    code, out, _ = cli(capsys, *argv, "--force")
    assert code == 0 and (home / "grader" / "grader.json").is_file()


def test_output_piped_to_a_reader_that_stops_ends_quietly(tmp_path: Path, tally: Any) -> None:
    """`crag config | head -1`: the reader is gone before crag is done writing."""
    read, write = os.pipe()
    os.close(read)
    with tried(tally, "bad input", "output piped to a reader that has gone (| head)"):
        done = subprocess.run(
            [sys.executable, "-m", "crag.cli.main", "config", "--home", str(tmp_path)],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
        os.close(write)
        assert (done.returncode, done.stderr) == (141, "")


def test_crag_version_says_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"crag {version('crag')}\n"
