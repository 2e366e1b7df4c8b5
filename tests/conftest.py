"""Shared fixtures: an offline environment, the evaluation data, fake embeddings.

Tests never reach the network: tracing, Hugging Face and LangGraph analytics are
switched off for the whole session, and the store/ingest `CRAG_*` variables of
the caller's shell are dropped so a developer's own `CRAG_HOME` or
`CRAG_CHROMA_URL` cannot leak into a test.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tally
from d2l import IngestedLibrary, ingest_d2l
from fakes import FakeEmbeddings, build_pdf
from requires import REQUIRE_ALL, missing, required

import crag.offline

OFFLINE_ENV = crag.offline.OFFLINE_ENV
#: Store and ingest knobs that would redirect a test's reads and writes.
DROPPED_ENV = (
    "CRAG_HOME",
    "CRAG_CHROMA_URL",
    "CRAG_COLLECTION",
    "CRAG_EXTERNAL_COLLECTION",
    "CRAG_EMBEDDINGS",
    "CRAG_CHUNK_SIZE",
    "CRAG_CHUNK_OVERLAP",
)


#: API keys set for the whole session (tests of a provider set their own): whatever the
#: suite prints or logs is searched for them at the end (`pytest_terminal_summary`).
FAKE_KEYS = {
    "OPENAI_API_KEY": "sk-test-cragsuite0123456789abcdefXYZ",
    "TAVILY_API_KEY": "tvly-dev-cragsuite0123456789abcdXYZ",
}
#: Tests ask the same questions again and again, of the graph: the answer cache would
#: serve them. Its own tests switch it on (`cache=True`, or by dropping this variable).
TEST_ENV = {"CRAG_CACHE": "false", **FAKE_KEYS}


@pytest.fixture(scope="session", autouse=True)
def offline_env() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        for key, value in OFFLINE_ENV.items():
            mp.setenv(key, value)
        for key in DROPPED_ENV:
            mp.delenv(key, raising=False)
        for key, value in TEST_ENV.items():
            mp.setenv(key, value)
        yield


# --- no key in the suite's output ------------------------------------------------------------
#
# Covered: what each test left in pytest's capture (stdout, stderr, log records at the
# capture level, the failure report) and every log record of the session at WARNING and
# above, whatever its logger. Not covered: output a test read itself (capsys, caplog:
# those tests assert on it), and subprocesses' output that no test prints.

_SCANNED = {"reports": 0, "records": 0}
_SHOWN: list[str] = []
#: Log records seen since the last report (they travel with it, as the tally does).
_WATCHED: dict[str, Any] = {"records": 0, "shown": []}
KEY_PROPERTY = "crag_log_keys"


def _has_key(text: str) -> bool:
    return any(key in text for key in FAKE_KEYS.values())


class _KeyWatch(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        _WATCHED["records"] += 1
        try:
            text = record.getMessage() + (record.exc_text or "")
        except Exception:
            return
        if _has_key(text):
            _WATCHED["shown"].append(f"log record of {record.name}")


@pytest.fixture(scope="session", autouse=True)
def key_watch() -> Iterator[None]:
    handler = _KeyWatch(level=logging.WARNING)
    logging.getLogger().addHandler(handler)
    yield
    logging.getLogger().removeHandler(handler)


def _take_watched() -> dict[str, Any] | None:
    if not _WATCHED["records"]:
        return None
    taken = {"records": _WATCHED["records"], "shown": list(_WATCHED["shown"])}
    _WATCHED.update(records=0, shown=[])
    return taken


#: The test files that take longest (model loads, ingesting dev books, the README's
#: commands), started first: two processes then finish together instead of one running
#: the last long file alone.
LONGEST_FIRST = (
    "integration/test_readme.py",
    "integration/test_local_llm.py",
    "integration/test_crag_graph.py",
    "integration/test_openai_server.py",
    "integration/test_ingest_retrieval.py",
    "integration/test_eval_libraries.py",
    "integration/test_train_grader.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.path.as_posix()
        return next(
            (i for i, f in enumerate(LONGEST_FIRST) if path.endswith(f)), len(LONGEST_FIRST)
        )

    items.sort(key=rank)  # stable: each file's tests keep their order


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Each phase's report carries what the phase recorded (reliability tally, log records
    scanned for keys), so the counts are made from reports, in one process or several.
    Under CRAG_TEST_REQUIRE_ALL=1 (`make test`, so CI) no test passes by skipping:
    whatever the skip's cause, the test fails with it (an expected failure stays one)."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    for name, records in ((tally.PROPERTY, tally.take_pending()), (KEY_PROPERTY, _take_watched())):
        if records is not None:
            report.user_properties.append((name, records))
    if required() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped, and under {REQUIRE_ALL}=1 no test may skip: {reason}"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _SCANNED["reports"] += 1
    if any(_has_key(text) for _, text in report.sections) or _has_key(report.longreprtext):
        _SHOWN.append(report.nodeid)
    for name, records in report.user_properties:
        if name == tally.PROPERTY:
            tally.merge(records)  # type: ignore[arg-type]
        elif name == KEY_PROPERTY:
            _SCANNED["records"] += records["records"]  # type: ignore[index]
            _SHOWN.extend(records["shown"])  # type: ignore[index]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = tally.summary()
    if lines:
        terminalreporter.section("reliability counts")
        for line in lines:
            terminalreporter.write_line(line)
    terminalreporter.write_line(
        f"API keys in the suite's output: {len(_SHOWN)} (fake keys set for the session; "
        f"{_SCANNED['reports']} test phases' captured output and {_SCANNED['records']} log records "
        "scanned)"
    )
    for where in _SHOWN:
        terminalreporter.write_line(f"  key shown by {where}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _SHOWN and exitstatus == 0:
        session.exitstatus = 1


#: Where the evaluation data comes from (it is not installed with crag).
EVAL_DATA = "the d2l dev library shipped in the repository as eval/d2l"


@pytest.fixture(scope="session")
def eval_dir() -> Path:
    """The d2l dev library, read in place from the repository's `eval/d2l`."""
    path = Path(__file__).resolve().parents[1] / "eval" / "d2l"
    if not (path / "questions.jsonl").is_file():
        missing(f"the evaluation data at {path}", EVAL_DATA)
    return path


@pytest.fixture(scope="session")
def books_dir(eval_dir: Path) -> Path:
    path = eval_dir / "books"
    if not any(path.glob("*.pdf")):
        missing(f"the books of {path}", EVAL_DATA)
    return path


@pytest.fixture(scope="session")
def d2l_library(eval_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> IngestedLibrary:
    """Part of the d2l library ingested once per test session with the local embedder,
    whichever worker asks first; each worker reads its own copy of the home."""
    from crag.filelock import exclusive

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    built = shared / "d2l-library"
    with exclusive(shared / "d2l-library.lock"):
        done = built / "done.json"
        if not done.exists():
            shutil.rmtree(built, ignore_errors=True)
            done.parent.mkdir(parents=True)
            done.write_text(json.dumps(ingest_d2l(eval_dir, built)))
    mine = tmp_path_factory.mktemp("d2l-home")
    shutil.copytree(built / "home", mine, dirs_exist_ok=True)
    embedded = json.loads((built / "done.json").read_text())["embedded"]
    return IngestedLibrary(mine, built / "books", embedded)


@pytest.fixture
def fake_embeddings() -> Callable[..., FakeEmbeddings]:
    """Factory: `fake_embeddings(fail_after=10, error=KeyboardInterrupt())`."""
    return FakeEmbeddings


@pytest.fixture
def make_pdf() -> Callable[..., bytes]:
    return build_pdf


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A `chroma run` server on loopback for the module's tests; its URL."""
    from processes import chroma_server

    from crag.retrieval.clients import forget_clients

    try:
        with chroma_server(tmp_path_factory.mktemp("chroma_server")) as url:
            yield url
    finally:
        forget_clients()


@pytest.fixture(scope="session")
def sample_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample library and its external pages, ingested once with the local embedder."""
    from crag.context import Context
    from crag.ingest.indexer import ingest_path

    samples = Path(__file__).resolve().parents[1] / "samples"
    home = tmp_path_factory.mktemp("sample-home")
    ctx = Context(home=home)
    assert ingest_path(ctx, samples / "library", collection="books").exit_code == 0
    assert ingest_path(ctx, samples / "external", collection="external").exit_code == 0
    return home
