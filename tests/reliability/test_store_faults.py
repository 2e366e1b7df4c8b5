"""Store faults and bad store inputs: one line naming cause and fix, never a crash.

Every bad input of `crag ask` and `crag ingest` that concerns the store (names, homes,
servers, embeddings, a corrupt database) must give one line on stderr, a non-zero
exit and create nothing. Every fault (a damaged vector index, a damaged database, a
full disk, a read-only home, a server that stops mid-run, an interrupted ingest) must
be survived: a one-line error instead of a crash, or a working answer, and
`crag ingest --rebuild` must bring the store back to what a clean ingest gives.

The CLI runs in-process where nothing can crash; damaged indexes go to a child
process, since Chroma's native loader would take pytest down with a SIGSEGV if crag
failed to stop it first. Embeddings are a fast hashed bag of words (16 dimensions),
patched in where crag builds its model.
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeEmbeddings
from processes import free_port
from requires import CORE, require_command

from crag.api import ask
from crag.cli.main import main
from crag.context import Context
from crag.errors import StoreError
from crag.ingest import indexer
from crag.ingest.indexer import Ingestor
from crag.models.remembering import Remembering
from crag.retrieval import clients, integrity, library

DIM = 16
CHUNKING = ["--chunk-size", "100", "--chunk-overlap", "0"]
ASK = ["--no-llm", "--external", "none", "--quiet"]
QUESTION = "What does paragraph 7 say about gamma and delta?"


class Hashed(FakeEmbeddings):
    """The shared fake embedder at this file's dimension."""

    def __init__(self, dim: int = DIM) -> None:
        super().__init__(dim)


def use_fake_model(dim: int = DIM, patch: Callable[[Any, str, Any], None] = setattr) -> None:
    """Make crag's `local` embeddings the hashed fake (in this process)."""

    def make(*_: Any, **__: Any) -> Remembering:
        return Remembering(Hashed(dim))

    patch(library, "embeddings_for", make)
    patch(indexer, "embeddings_for", make)


@pytest.fixture
def fake_model(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """Calling it with a dimension switches the fake model (a "different model")."""
    use_fake_model(DIM, monkeypatch.setattr)
    return lambda dim: use_fake_model(dim, monkeypatch.setattr)


def write_library(folder: Path, files: int = 10, paragraphs: int = 110, name: str = "part") -> Path:
    """About 1,100 chunks of 100 characters: past Chroma's sync threshold (1,000), so the
    vector index is persisted whole (the files whose damage crashes Chroma)."""
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        paras = [
            f"Paragraph {i} of {name} {f}: "
            + " ".join(words[(f * 5 + i * 3 + j) % len(words)] for j in range(8))
            + "."
            for i in range(paragraphs)
        ]
        (folder / f"{name}{f}.txt").write_text("\n\n".join(paras), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(library, home): one clean ingest, sealed; tests work on copies of the home."""
    root = tmp_path_factory.mktemp("clean")
    lib = write_library(root / "lib")
    ctx = Context(home=root / "home", chunk_size=100, chunk_overlap=0)
    summary = Ingestor(ctx, embeddings=Hashed()).run(lib)
    assert summary.exit_code == 0 and summary.chunks_written > 1000
    assert (segment(ctx.store.home) / "index_metadata.pickle").is_file()  # persisted whole
    assert (
        "books" in json.loads((ctx.store.home / "chroma.integrity.json").read_text())["collections"]
    )
    return lib, ctx.store.home


@pytest.fixture
def home(clean: tuple[Path, Path], tmp_path: Path) -> Path:
    """A copy of the clean home (same bytes and mtimes, so its seal holds)."""
    return Path(shutil.copytree(clean[1], tmp_path / "home"))


@pytest.fixture(autouse=True)
def _fresh_clients() -> Iterator[None]:
    yield
    clients.forget_clients()


def segment(home: Path, collection: str = "books") -> Path:
    """The folder of a collection's persisted vector index."""
    db = sqlite3.connect(f"file:{home / 'chroma' / 'chroma.sqlite3'}?mode=ro", uri=True)
    try:
        (seg,) = db.execute(
            "SELECT s.id FROM segments s JOIN collections c ON s.collection = c.id "
            "WHERE c.name = ? AND s.scope = 'VECTOR'",
            (collection,),
        ).fetchone()
    finally:
        db.close()
    return home / "chroma" / str(seg)


def stored_ids(home: Path, collection: str = "books") -> list[str]:
    """The chunk ids of a collection, read from Chroma's database (never its index)."""
    db = sqlite3.connect(f"file:{home / 'chroma' / 'chroma.sqlite3'}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT e.embedding_id FROM embeddings e JOIN segments s ON e.segment_id = s.id "
            "JOIN collections c ON s.collection = c.id WHERE c.name = ?",
            (collection,),
        ).fetchall()
    finally:
        db.close()
    return sorted(r[0] for r in rows)


def tree(path: Path) -> set[str]:
    """Everything under `path` (to show that nothing was created)."""
    if not path.exists():
        return set()
    return {p.relative_to(path).as_posix() for p in path.rglob("*") if "journal" not in p.name}


def one_line(err: str) -> bool:
    lines = [line for line in err.splitlines() if line.strip()]
    return len(lines) == 1 and lines[0].startswith("crag ") and "Traceback" not in err


def crag(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- damage -----------------------------------------------------------------------------------


def _garble(path: Path, at: int, n: int, seed: int = 13) -> None:
    with path.open("r+b") as fh:
        fh.seek(at)
        fh.write(random.Random(seed).randbytes(n))


def _flip_one_vector(folder: Path) -> None:
    """Overwrite the floats of one stored vector: the index stays well-formed."""
    header = (folder / "header.bin").read_bytes()
    stride = int.from_bytes(header[28:36], "little")
    data_at = int.from_bytes(header[44:52], "little")
    with (folder / "data_level0.bin").open("r+b") as fh:
        fh.seek(7 * stride + data_at)
        fh.write(b"\x00\x00\x00\x3f" * DIM)  # 0.5 everywhere


DAMAGE: dict[str, Callable[[Path], None]] = {
    "index: random bytes in data_level0.bin": lambda f: _garble(f / "data_level0.bin", 1000, 20000),
    "index: data_level0.bin truncated": lambda f: os.truncate(f / "data_level0.bin", 5000),
    "index: header.bin garbled": lambda f: _garble(f / "header.bin", 4, 60),
    "index: link_lists.bin garbled": lambda f: _garble(f / "link_lists.bin", 0, 2000),
    "index: length.bin missing": lambda f: (f / "length.bin").unlink(),
    "index: index_metadata.pickle garbled": lambda f: _garble(
        f / "index_metadata.pickle", 200, 3000
    ),
}

#: Runs `main` once per argv in a fresh interpreter and prints one JSON line per run, so
#: a crash is seen (as a signal exit and fewer lines) instead of killing pytest.
DRIVER = """
import contextlib, importlib.util, io, json, logging, os, sys
if os.environ.get("FILE_SIZE_LIMIT"):  # every write past it fails, as on a full disk
    import resource
    limit = int(os.environ["FILE_SIZE_LIMIT"])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
sys.path.insert(0, os.path.join(os.path.dirname(sys.argv[1]), "..", "support"))
spec = importlib.util.spec_from_file_location("store_faults", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.use_fake_model(int(sys.argv[2]))
from crag.cli.main import main

class ToStderr(logging.StreamHandler):
    stream = property(lambda self: sys.stderr, lambda self, value: None)

logging.getLogger().addHandler(ToStderr())
logging.getLogger().setLevel(logging.WARNING)
for argv in json.loads(sys.argv[3]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue()}), flush=True)
"""


def in_child(
    runs: list[list[str]],
    *,
    dim: int = DIM,
    prefix: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> tuple[int, list[dict[str, Any]], str]:
    """(exit status, one result per run that finished, stderr) of the driver."""
    proc = subprocess.run(
        [*(prefix or []), sys.executable, "-c", DRIVER, __file__, str(dim), json.dumps(runs)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, results, proc.stderr


# --- bad inputs --------------------------------------------------------------------------------

Setup = Callable[[Path], dict[str, Any]]


def _home_is_file(tmp: Path) -> dict[str, Any]:
    (tmp / "afile").write_text("not a folder")
    return {"home": tmp / "afile", "match": "is not a folder"}


def _home_inside_file(tmp: Path) -> dict[str, Any]:
    (tmp / "afile").write_text("not a folder")
    return {"home": tmp / "afile" / "sub", "match": r"no library at|Not a directory"}


def _store_is_file(tmp: Path) -> dict[str, Any]:
    (tmp / "h").mkdir()
    (tmp / "h" / "chroma").write_text("not a folder")
    return {"home": tmp / "h", "match": "is not a folder"}


def _sqlite_not_a_database(tmp: Path) -> dict[str, Any]:
    (tmp / "h" / "chroma").mkdir(parents=True)
    (tmp / "h" / "chroma" / "chroma.sqlite3").write_bytes(random.Random(3).randbytes(40000))
    return {"home": tmp / "h", "match": r"chroma.sqlite3 is damaged.*--rebuild"}


def _closed_port(tmp: Path) -> dict[str, Any]:
    url = f"http://127.0.0.1:{free_port()}"
    return {"home": tmp / "h", "flags": ["--chroma-url", url], "match": "cannot reach the Chroma"}


BAD_INPUTS: dict[str, tuple[Setup, bool]] = {
    # kind: (setup returning home/flags/match, also a bad input for `crag ingest`)
    "collection name with ../": (
        lambda t: {"flags": ["--collection", "../x"], "match": "bad collection name"},
        True,
    ),
    "collection name with a space": (
        lambda t: {"flags": ["--collection", "my books"], "match": "bad collection name"},
        True,
    ),
    "empty collection name": (
        lambda t: {"flags": ["--collection", ""], "match": "bad collection name"},
        True,
    ),
    "collection name of 600 characters": (
        lambda t: {"flags": ["--collection", "a" * 600], "match": "bad collection name"},
        True,
    ),
    "--home is a file": (_home_is_file, True),
    "--home inside a file": (_home_inside_file, True),
    "HOME/chroma is a file": (_store_is_file, True),
    "chroma.sqlite3 is not a database": (_sqlite_not_a_database, True),
    "never-ingested home": (
        lambda t: {"home": t / "never", "match": r"no library at .*crag ingest PATH"},
        False,
    ),
    "Chroma server stopped (closed port)": (_closed_port, True),
    "Chroma URL of another scheme": (
        lambda t: {"flags": ["--chroma-url", "ftp://x"], "match": "invalid Chroma URL"},
        True,
    ),
    "Chroma URL with port 99999": (
        lambda t: {"flags": ["--chroma-url", "http://127.0.0.1:99999"], "match": "invalid port"},
        True,
    ),
}


@pytest.mark.parametrize("kind", list(BAD_INPUTS))
def test_bad_store_inputs_get_one_line_and_create_nothing(
    kind: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_model: Callable[[int], None],
    tally: Any,
) -> None:
    setup, for_ingest = BAD_INPUTS[kind]
    case = setup(tmp_path)
    home = Path(case.get("home", tmp_path / "h"))
    lib = write_library(tmp_path / "lib", files=1, paragraphs=3)
    before = tree(tmp_path)
    argv = ["--home", str(home), *case.get("flags", [])]

    code, _, err = crag(capsys, "ask", QUESTION, *argv, *ASK)
    ok = code != 0 and one_line(err) and tree(tmp_path) == before
    assert ok, (code, err, tree(tmp_path) - before)
    assert re.search(case["match"], err), err
    # a conversation fails the same way, before its first question
    monkeypatch.setattr("sys.stdin", io.StringIO(QUESTION + "\n"))
    code, out, err = crag(capsys, "chat", *argv, *ASK[:-1])
    ok_chat = code == 2 and out == "" and one_line(err) and tree(tmp_path) == before
    assert ok_chat and re.search(case["match"], err), (code, err)
    if for_ingest:
        code, _, err = crag(capsys, "ingest", str(lib), *argv, "-q")
        made = tree(tmp_path) - before
        if home.is_dir() and home.relative_to(tmp_path).as_posix() in before:
            made -= {home.relative_to(tmp_path).as_posix() + "/ingest.lock"}  # an existing home's
        ok_ingest = code != 0 and one_line(err) and not made
        assert ok_ingest, (code, err, made)
        ok = ok and ok_ingest
    tally("bad input", kind, ok)


def test_a_thread_in_a_home_that_is_a_file_is_told_so(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a folder")
    ctx = Context(home=tmp_path / "afile", chat_model="extractive", external="none")
    with pytest.raises(StoreError, match="afile is not a folder"):
        ask(QUESTION, context=ctx, thread_id="t1")


def test_a_missing_collection_is_named_and_not_created(
    home: Path, capsys: pytest.CaptureFixture[str], fake_model: Callable[[int], None], tally: Any
) -> None:
    before = tree(home)
    code, _, err = crag(capsys, "ask", QUESTION, "--home", str(home), "--collection", "notes", *ASK)
    assert code == 2 and one_line(err), err
    assert "collection 'notes' does not exist" in err and "--collection notes" in err
    ok = tree(home) == before and stored_ids(home, "notes") == []
    tally("bad input", "missing collection", ok and code == 2 and one_line(err))
    assert ok


def test_embeddings_of_another_model_are_refused(
    home: Path,
    clean: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fake_model: Callable[[int], None],
    tally: Any,
) -> None:
    ids = stored_ids(home)
    # another spec than the collection was built with
    other = ["--home", str(home), "--embeddings", "openai:text-embedding-3-small"]
    code, _, err = crag(capsys, "ask", QUESTION, *other, *ASK)
    spec_ok = code == 2 and one_line(err) and "CRAG_EMBEDDINGS=local" in err
    code, _, err = crag(capsys, "ingest", str(clean[0]), *other, *CHUNKING, "-q")
    spec_ok = spec_ok and code == 1 and one_line(err) and "built with embeddings 'local'" in err
    tally("bad input", "embeddings spec other than the collection's", spec_ok)

    # the same spec, but a model of another dimension (e.g. a changed local model)
    fake_model(DIM * 2)
    code, _, err = crag(capsys, "ask", QUESTION, "--home", str(home), *ASK)
    dim_ok = code == 2 and one_line(err) and "holds 16-dimensional vectors" in err
    assert dim_ok, err
    extra = write_library(tmp_path / "more", files=1, paragraphs=2, name="extra")
    code, out, err = crag(capsys, "ingest", str(extra), "--home", str(home), *CHUNKING, "-q")
    dim_ok = dim_ok and code == 1 and one_line(err) and "another embedding model" in err
    assert dim_ok and "stopped:" in out, (out, err)
    tally("bad input", "embeddings of another dimension", dim_ok and stored_ids(home) == ids)
    assert spec_ok and stored_ids(home) == ids


# --- a damaged vector index --------------------------------------------------------------------


def test_a_damaged_index_is_refused_before_chroma_loads_it_and_rebuild_repairs_it(
    clean: tuple[Path, Path], tmp_path: Path, tally: Any
) -> None:
    lib, clean_home = clean
    homes = {}
    for n, (kind, damage) in enumerate(DAMAGE.items()):
        homes[kind] = Path(shutil.copytree(clean_home, tmp_path / f"h{n}"))
        damage(segment(homes[kind]))
    flipped = Path(shutil.copytree(clean_home, tmp_path / "flipped"))
    _flip_one_vector(segment(flipped))
    intact = Path(shutil.copytree(clean_home, tmp_path / "intact"))
    rebuilt = homes["index: random bytes in data_level0.bin"]

    runs: list[list[str]] = [["ask", QUESTION, "--home", str(intact), *ASK]]
    for kind in DAMAGE:
        runs += [
            ["ask", QUESTION, "--home", str(homes[kind]), *ASK],
            ["ingest", str(lib), "--home", str(homes[kind]), *CHUNKING, "-q"],
        ]
    runs += [
        ["ask", QUESTION, "--home", str(flipped), *ASK],
        ["ingest", str(lib), "--home", str(rebuilt), *CHUNKING, "--rebuild"],
        ["ask", QUESTION, "--home", str(rebuilt), *ASK],
    ]
    status, results, stderr = in_child(runs)
    assert status == 0 and len(results) == len(runs), (
        f"the child died with status {status} at run {len(results)}: {runs[len(results)]}\n"
        f"{stderr[-2000:]}"
    )

    baseline = results.pop(0)
    assert baseline["code"] == 0 and baseline["err"] == "", baseline  # sealed: no warning
    assert "verdict:" in baseline["out"]
    for kind in DAMAGE:
        ask, ingest = results.pop(0), results.pop(0)
        ok = (
            ask["code"] == 2
            and one_line(ask["err"])
            and "--rebuild" in ask["err"]
            and ingest["code"] == 1
            and one_line(ingest["err"])
            and "--rebuild" in ingest["err"]
        )
        tally("fault", kind, ok)
        assert ok, (kind, ask, ingest)

    # floats overwritten, structure intact: a warning, and the answer still comes
    ask = results.pop(0)
    ok = ask["code"] == 0 and "changed since the last `crag ingest`" in ask["err"]
    tally("fault", "index: one vector's floats overwritten (well-formed)", ok)
    assert ok, ask

    # --rebuild drops the damaged collection without loading it, and restores it
    rebuild, after = results.pop(0), results.pop(0)
    assert rebuild["code"] == 0, rebuild
    assert "rebuilding 'books': dropped the old one" in rebuild["err"]
    assert after["code"] == 0 and after["err"] == "", after
    ok = stored_ids(rebuilt) == stored_ids(clean_home)
    assert integrity.index_problem(segment(rebuilt)) is None
    assert len(list((rebuilt / "chroma").iterdir())) == 2  # the damaged folder is gone
    tally("fault", "rebuild of a damaged index equals a clean ingest", ok)
    assert ok


def test_queries_leave_the_index_files_as_the_ingest_sealed_them(
    home: Path, capsys: pytest.CaptureFixture[str], fake_model: Callable[[int], None]
) -> None:
    seal = json.loads((home / "chroma.integrity.json").read_text())["collections"]["books"]
    folder = home / "chroma" / seal["segment"]
    for _ in range(2):
        assert crag(capsys, "ask", QUESTION, "--home", str(home), *ASK)[0] == 0
    now = {p.name: [p.stat().st_size, p.stat().st_mtime_ns] for p in folder.iterdir()}
    assert now == {name: value[:2] for name, value in seal["files"].items()}


def test_a_store_copied_without_its_dates_is_trusted_by_content(
    clean: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fake_model: Callable[[int], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    copy = Path(shutil.copytree(clean[1], tmp_path / "copy", copy_function=shutil.copy))
    code, _, err = crag(capsys, "ask", QUESTION, "--home", str(copy), *ASK)
    assert code == 0 and err == "" and "changed since" not in caplog.text


def test_an_interrupted_ingest_leaves_no_seal_and_no_false_alarm(
    home: Path,
    clean: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    fake_model: Callable[[int], None],
    caplog: pytest.LogCaptureFixture,
    tally: Any,
) -> None:
    lib = Path(shutil.copytree(clean[0], home.parent / "lib"))
    for f in sorted(lib.iterdir())[:3]:
        f.write_text(f.read_text().replace("alpha", "omega"), encoding="utf-8")
    # the library moved here: its old place is empty (else it would be another library
    # holding files of the same names, which an ingest never replaces)
    aside = clean[0].rename(clean[0].with_name("lib.aside"))
    try:
        _interrupt_an_ingest(home, lib, capsys, caplog, tally)
    finally:
        aside.rename(clean[0])


def _interrupt_an_ingest(
    home: Path,
    lib: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    tally: Any,
) -> None:
    class Interrupting(Hashed):
        calls = 0

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            Interrupting.calls += 1
            if Interrupting.calls == 2:  # Ctrl-C in the second file
                raise KeyboardInterrupt
            return super().embed_documents(texts)

    ctx = Context(home=home, chunk_size=100, chunk_overlap=0)
    with pytest.raises(KeyboardInterrupt):
        Ingestor(ctx, embeddings=Interrupting(), batch_size=300).run(lib)
    seals = json.loads((home / "chroma.integrity.json").read_text())["collections"]
    assert "books" not in seals  # dropped before the first write

    code, _, err = crag(capsys, "ask", QUESTION, "--home", str(home), *ASK)
    ok = code == 0 and err == "" and "changed since" not in caplog.text
    code, _, err = crag(capsys, "ingest", str(lib), "--home", str(home), *CHUNKING, "-q")
    seals = json.loads((home / "chroma.integrity.json").read_text())["collections"]
    ok = ok and code == 0 and "books" in seals
    tally("fault", "ingest interrupted mid-write (seal dropped)", ok)
    assert ok, err


# --- a damaged database ------------------------------------------------------------------------


def test_a_damaged_database_is_one_line_and_rebuild_sets_it_aside(
    tmp_path: Path, tally: Any
) -> None:
    lib = write_library(tmp_path / "lib", files=3, paragraphs=30)
    clean_home = tmp_path / "clean"
    Ingestor(Context(home=clean_home, chunk_size=100, chunk_overlap=0), embeddings=Hashed()).run(
        lib
    )
    broken = Path(shutil.copytree(clean_home, tmp_path / "malformed"))
    _garble(broken / "chroma" / "chroma.sqlite3", 8192, 30000, seed=2)
    garbage = Path(shutil.copytree(clean_home, tmp_path / "garbage"))
    (garbage / "chroma" / "chroma.sqlite3").write_bytes(random.Random(5).randbytes(50000))
    runs = [
        ["ask", QUESTION, "--home", str(broken), *ASK],
        ["ingest", str(lib), "--home", str(broken), *CHUNKING, "--rebuild", "-q"],
        ["ask", QUESTION, "--home", str(broken), *ASK],
        ["ingest", str(lib), "--home", str(garbage), *CHUNKING, "--rebuild", "-q"],
    ]
    status, results, stderr = in_child(runs)  # SQLite's damage is Chroma's to read
    assert status == 0 and len(results) == len(runs), stderr[-2000:]
    ask, rebuild, after, rebuild2 = results
    ok = ask["code"] == 2 and one_line(ask["err"]) and "chroma.sqlite3 is damaged" in ask["err"]
    ok = ok and rebuild["code"] == 0 and "moved" in rebuild["err"] and after["code"] == 0
    ok = ok and stored_ids(broken) == stored_ids(clean_home)
    assert any(p.name.startswith("chroma.damaged-") for p in broken.iterdir())
    tally("fault", "database: damaged pages (malformed)", ok)
    ok2 = rebuild2["code"] == 0 and stored_ids(garbage) == stored_ids(clean_home)
    tally("fault", "database: not a database any more", ok2)
    assert ok and ok2, results


# --- the disk, the folder, the server --------------------------------------------------------


def test_a_full_disk_stops_the_ingest_with_one_line_and_the_rerun_completes(
    clean: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fake_model: Callable[[int], None],
    tally: Any,
) -> None:
    """A file size limit (`ulimit -f`) makes every write past it fail as on a full disk."""
    pytest.importorskip("resource")  # POSIX
    lib = clean[0]
    home = tmp_path / "home"
    runs = [["ingest", str(lib), "--home", str(home), *CHUNKING, "-q"]]
    status, results, stderr = in_child(runs, env={"FILE_SIZE_LIMIT": "300000"})
    assert status == 0 and len(results) == 1, stderr[-2000:]
    (full,) = results
    ok = full["code"] == 1 and one_line(full["err"]) and "ulimit -f" in full["err"]
    assert ok, full

    code, _, err = crag(capsys, "ingest", str(lib), "--home", str(home), *CHUNKING, "-q")
    ok = ok and code == 0 and stored_ids(home) == stored_ids(clean[1])
    tally("fault", "disk full during ingest (file size limit)", ok)
    assert ok, err


def test_a_full_disk_reported_by_chroma_is_one_line_and_changes_nothing(
    home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fake_model: Callable[[int], None],
    monkeypatch: pytest.MonkeyPatch,
    tally: Any,
) -> None:
    from chromadb.api.models.Collection import Collection
    from chromadb.errors import InternalError

    def full(*args: Any, **kwargs: Any) -> None:
        raise InternalError("error returned from database: (code: 13) database or disk is full")

    ids = stored_ids(home)
    extra = write_library(tmp_path / "more", files=1, paragraphs=2, name="extra")
    monkeypatch.setattr(Collection, "upsert", full)
    code, out, err = crag(capsys, "ingest", str(extra), "--home", str(home), *CHUNKING, "-q")
    ok = code == 1 and one_line(err) and "no room to write" in err and "stopped:" in out
    monkeypatch.setattr(Collection, "query", full)
    code, _, err = crag(capsys, "ask", QUESTION, "--home", str(home), *ASK)
    ok = ok and code == 2 and one_line(err) and "free some disk space" in err
    ok = ok and stored_ids(home) == ids
    tally("fault", "disk full (reported by Chroma)", ok)
    assert ok, err


def _read_only(path: Path, writable: bool = False) -> None:
    for p in [path, *path.rglob("*")]:
        mode = p.stat().st_mode
        p.chmod(mode | 0o200 if writable else mode & ~0o222)


def test_a_read_only_home_is_one_line_for_ask_and_ingest(
    home: Path, clean: tuple[Path, Path], tally: Any
) -> None:
    prefix: list[str] = []
    if os.geteuid() == 0:  # root writes anywhere: drop that power in the child
        # as root, a read-only home is only read-only without CAP_DAC_OVERRIDE
        setpriv = str(require_command("setpriv", "apt-get install util-linux"))
        prefix = [setpriv, "--bounding-set", "-dac_override,-dac_read_search,-fowner", "--"]
    runs = [
        ["ask", QUESTION, "--home", str(home), *ASK],
        ["ingest", str(clean[0]), "--home", str(home), *CHUNKING, "-q"],
    ]
    _read_only(home)
    try:
        status, results, stderr = in_child(runs, prefix=prefix)
    finally:
        _read_only(home, writable=True)
    assert status == 0 and len(results) == 2, stderr[-2000:]
    for (command, *_), result in zip(runs, results, strict=True):
        ok = (
            result["code"] != 0
            and one_line(result["err"])
            and "cannot write to" in result["err"]
            and "writable" in result["err"]
        )
        tally("fault", f"read-only home ({command})", ok)
        assert ok, result


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """A `chroma run` on loopback: (url, stop) where stop() ends it."""
    exe = require_command("chroma", CORE)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tmp_path / "server.log").open("wb")
    command = [str(exe), "run", "--path", str(tmp_path / "db"), "--host", "127.0.0.1"]
    proc = subprocess.Popen([*command, "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"chroma run did not start: {(tmp_path / 'server.log').read_text()}"
                    )
                time.sleep(0.2)

        def stop() -> None:
            proc.terminate()
            proc.wait(timeout=20)

        yield url, stop
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


def test_a_server_stopped_mid_ingest_is_one_line(
    chroma_server: tuple[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tally: Any,
) -> None:
    url, stop = chroma_server

    class StopsTheServer(Hashed):
        calls = 0

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            StopsTheServer.calls += 1
            if StopsTheServer.calls == 2:
                stop()
            return super().embed_documents(texts)

    monkeypatch.setattr(indexer, "embeddings_for", lambda *a, **k: StopsTheServer())
    lib = write_library(tmp_path / "lib", files=2, paragraphs=80)
    argv = ["--home", str(tmp_path / "home"), "--chroma-url", url]
    code, out, err = crag(capsys, "ingest", str(lib), *argv, *CHUNKING, "-q")
    ok = code == 1 and one_line(err) and url.split("//")[1] in err and "stopped:" in out
    code, _, err2 = crag(capsys, "ask", QUESTION, *argv, *ASK)
    ok = ok and code == 2 and one_line(err2) and "Chroma server" in err2 and "chroma run" in err2
    tally("fault", "Chroma server stopped mid-ingest", ok)
    assert ok, (out, err, err2)


def test_verbose_shows_the_traceback_behind_the_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_model: Callable[[int], None]
) -> None:
    (tmp_path / "afile").write_text("not a folder")
    lib = write_library(tmp_path / "lib", files=1, paragraphs=2)
    for argv in (
        ["-v", "ask", QUESTION, "--home", str(tmp_path / "afile"), *ASK],
        ["-v", "ingest", str(lib), "--home", str(tmp_path / "afile"), "-q"],
    ):
        code, _, err = crag(capsys, *argv)
        assert code == 2 and "Traceback" in err, err
        last = err.strip().splitlines()[-1]
        assert last.startswith("crag ") and "is not a folder" in last, err
