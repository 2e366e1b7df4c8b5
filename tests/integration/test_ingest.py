"""The indexer: incremental re-runs, replaced files, crashes, pruning, bad inputs, CLI.

These use a fast fake embedder (the model is irrelevant here); retrieval quality
with the real model is in test_ingest_retrieval.py.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeEmbeddings

from crag.cli import ingest as cli
from crag.cli.main import build_parser
from crag.context import Context
from crag.errors import IngestError
from crag.ingest import indexer, loaders
from crag.ingest.chunking import chunk_pages
from crag.ingest.indexer import Ingestor, chunk_id, discover, ingest_path
from crag.ingest.loaders import load_document
from crag.ingest.progress import Progress, format_summary
from crag.retrieval.library import get_collection, open_client

TOPICS = ["gradient descent", "dropout", "attention", "convolution", "kernels", "recurrence"]


def _doc(topic: str, n: int = 6, extra: str = "") -> str:
    paras = [
        f"Paragraph {i} explains {topic} in detail. It says that {topic} is studied "
        f"in section {i}, with examples of how {topic} behaves. {extra}".strip()
        for i in range(n)
    ]
    return f"<!-- source: test -->\n# About {topic}\n\n" + "\n\n".join(paras) + "\n"


@pytest.fixture
def library(tmp_path: Path, make_pdf: Callable[..., bytes]) -> Path:
    lib = tmp_path / "lib"
    (lib / "sub").mkdir(parents=True)
    (lib / "a.md").write_text(_doc(TOPICS[0]), encoding="utf-8")
    (lib / "sub" / "b.md").write_text(_doc(TOPICS[1]), encoding="utf-8")
    (lib / "c.txt").write_text(_doc(TOPICS[2]).replace("# ", ""), encoding="utf-8")
    pages = [_doc(TOPICS[3], 3).split("\n", 1)[1], _doc(TOPICS[4], 3).split("\n", 1)[1]]
    (lib / "d.pdf").write_bytes(make_pdf(pages, title="Convolutions and kernels"))
    (lib / "image.png").write_bytes(b"\x89PNG not a document")
    (lib / ".hidden.md").write_text("# hidden\n\nnot ingested\n", encoding="utf-8")
    return lib


@pytest.fixture
def ctx(tmp_path: Path) -> Context:
    return Context(home=tmp_path / "home", chunk_size=300, chunk_overlap=50)


def _rows(ctx: Context, name: str | None = None) -> dict[str, dict[str, Any]]:
    collection = get_collection(open_client(ctx), name or ctx.collection)
    got = collection.get(include=["metadatas", "documents"])
    return {
        cid: {**(meta or {}), "_text": doc}
        for cid, meta, doc in zip(
            got["ids"], got["metadatas"] or [], got["documents"] or [], strict=True
        )
    }


def _expected_chunks(path: Path, ctx: Context) -> int:
    doc = load_document(path)
    return len(chunk_pages(doc.pages, doc.kind, ctx.chunk_size, ctx.chunk_overlap))


def test_discover_walks_recursively_and_skips_hidden_and_unsupported(library: Path) -> None:
    found = discover(library)
    assert [found.source(f) for f in found.files] == ["a.md", "c.txt", "d.pdf", "sub/b.md"]


def test_broken_and_looping_links_get_a_reason(library: Path) -> None:
    (library / "gone.pdf").symlink_to(library / "missing.pdf")
    (library / "loop1.md").symlink_to(library / "loop2.md")
    (library / "loop2.md").symlink_to(library / "loop1.md")
    found = discover(library)
    assert [found.source(f) for f in found.files] == ["a.md", "c.txt", "d.pdf", "sub/b.md"]
    reasons = dict(found.errors)
    assert set(reasons) == {"gone.pdf", "loop1.md", "loop2.md"}
    assert all("broken symbolic link" in r for r in reasons.values())


def test_ingest_then_rerun_adds_and_embeds_nothing(library: Path, ctx: Context) -> None:
    fake = FakeEmbeddings()
    first = ingest_path(ctx, library, embeddings=fake)
    assert first.exit_code == 0 and first.files_ok == 4
    rows = _rows(ctx)
    expected = sum(_expected_chunks(p, ctx) for p in discover(library).files)
    assert len(rows) == expected == first.chunks_written == fake.texts
    assert fake.calls > 0

    for meta in rows.values():
        for key in ("source", "title", "chunk", "content_hash", "file_hash", "version", "chunks"):
            assert key in meta
        assert meta["content_hash"] == loaders.sha256_hex(meta["_text"])
        if meta["source"] == "d.pdf":
            assert meta["page"] in ("1", "2") and meta["title"] == "Convolutions and kernels"
        else:
            assert "page" not in meta
    titles = {m["source"]: m["title"] for m in rows.values()}
    assert titles["a.md"] == f"About {TOPICS[0]}" and titles["c.txt"] == "c"
    # markdown comments are not content; in a .txt file they are just text
    assert not any("source: test" in m["_text"] for m in rows.values() if m["kind"] == "markdown")

    again = FakeEmbeddings()
    second = ingest_path(ctx, library, embeddings=again)
    assert again.calls == 0 and again.texts == 0
    assert second.files_unchanged == 4 and second.files_ok == 0 and second.exit_code == 0
    assert _rows(ctx).keys() == rows.keys()


def test_chunk_ids_are_stable_across_stores(library: Path, tmp_path: Path, ctx: Context) -> None:
    ingest_path(ctx, library, embeddings=FakeEmbeddings())
    other = Context(home=tmp_path / "other", chunk_size=300, chunk_overlap=50)
    ingest_path(other, library, embeddings=FakeEmbeddings())
    assert _rows(ctx).keys() == _rows(other).keys()
    meta = next(iter(_rows(ctx).values()))
    assert chunk_id(meta["source"], meta["version"], meta["chunk"]) in _rows(ctx)


def test_changed_file_replaces_its_chunks(library: Path, ctx: Context) -> None:
    ingest_path(ctx, library, embeddings=FakeEmbeddings())
    before = _rows(ctx)
    old_a = {cid for cid, m in before.items() if m["source"] == "a.md"}
    # keep the first paragraphs, change the rest: unchanged chunks keep their vectors
    text = (library / "a.md").read_text(encoding="utf-8")
    (library / "a.md").write_text(text + "\nA brand new closing paragraph.\n", encoding="utf-8")

    fake = FakeEmbeddings()
    summary = ingest_path(ctx, library, embeddings=fake)
    report = {f.source: f for f in summary.files}["a.md"]
    assert report.status == "updated"
    after = _rows(ctx)
    new_a = {cid for cid, m in after.items() if m["source"] == "a.md"}
    assert not old_a & new_a  # every id of the old version is gone
    assert len(new_a) == _expected_chunks(library / "a.md", ctx) == report.chunks
    assert report.deleted == len(old_a)
    assert any("brand new closing" in after[c]["_text"] for c in new_a)
    assert len({after[c]["version"] for c in new_a}) == 1
    # other files untouched, and only the changed text went through the model
    assert {c for c in after if c not in new_a} == {c for c in before if c not in old_a}
    assert 0 < fake.texts < report.chunks and report.reused == report.chunks - fake.texts


def test_changed_chunking_reindexes(library: Path, ctx: Context) -> None:
    ingest_path(ctx, library, embeddings=FakeEmbeddings())
    smaller = ctx.with_overrides(chunk_size=200, chunk_overlap=20)
    summary = ingest_path(smaller, library, embeddings=FakeEmbeddings())
    assert summary.files_ok == 4 and summary.files_unchanged == 0
    expected = sum(_expected_chunks(p, smaller) for p in discover(library).files)
    assert len(_rows(ctx)) == expected


def test_interrupted_ingest_resumes_without_duplicates(library: Path, ctx: Context) -> None:
    total = sum(_expected_chunks(p, ctx) for p in discover(library).files)
    crashing = FakeEmbeddings(fail_after=5, error=KeyboardInterrupt())
    ingestor = Ingestor(ctx, embeddings=crashing, batch_size=2)
    with pytest.raises(KeyboardInterrupt):
        ingestor.run(library)
    assert ingestor.summary.interrupted and ingestor.summary.exit_code == 130
    partial = _rows(ctx)
    assert 0 < len(partial) < total

    resumed = FakeEmbeddings()
    summary = ingest_path(ctx, library, embeddings=resumed)
    rows = _rows(ctx)
    assert len(rows) == total  # nothing missing, nothing twice
    assert set(partial) <= set(rows)
    assert resumed.texts == total - len(partial)  # only the missing chunks
    assert "resumed" in {f.status for f in summary.files}
    assert ingest_path(ctx, library, embeddings=FakeEmbeddings()).files_unchanged == 4


def test_embedder_failure_leaves_the_index_as_it_was(library: Path, ctx: Context) -> None:
    ingest_path(ctx, library, embeddings=FakeEmbeddings())
    before = _rows(ctx)
    (library / "a.md").write_text(_doc("something else entirely", 8), encoding="utf-8")
    broken = FakeEmbeddings(fail_after=3)
    summary = Ingestor(ctx, embeddings=broken, batch_size=2).run(library)
    assert summary.error and "a.md" in summary.error and "simulated" in summary.error
    assert summary.exit_code == 1 and summary.not_processed == 4
    assert _rows(ctx).keys() == before.keys()  # old version of a.md still complete


def test_killed_process_recovers(library: Path, ctx: Context, tmp_path: Path) -> None:
    """A real `kill -9` midway: the next run completes the store exactly."""
    script = tmp_path / "slow_ingest.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, time
            sys.path.insert(0, {str(Path(__file__).parents[1])!r})
            from conftest import FakeEmbeddings
            from crag.context import Context
            from crag.ingest.indexer import Ingestor

            class Slow(FakeEmbeddings):
                def embed_documents(self, texts):
                    time.sleep(0.2)
                    return super().embed_documents(texts)

            def on_event(event):
                if event["event"] == "progress":
                    print("written", flush=True)

            ctx = Context(home={str(ctx.home)!r}, chunk_size=300, chunk_overlap=50)
            Ingestor(ctx, embeddings=Slow(), batch_size=2, on_event=on_event).run({str(library)!r})
            print("finished", flush=True)
            """
        ),
        encoding="utf-8",
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    assert proc.stdout is not None
    written = 0
    for line in proc.stdout:
        written += line.strip() == "written"
        if written == 3:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    total = sum(_expected_chunks(p, ctx) for p in discover(library).files)
    partial = len(_rows(ctx))
    assert 0 < partial < total
    fake = FakeEmbeddings()
    summary = ingest_path(ctx, library, embeddings=fake)
    assert summary.exit_code == 0
    assert len(_rows(ctx)) == total and fake.texts == total - partial


def test_prune_removes_files_no_longer_present(library: Path, ctx: Context) -> None:
    ingest_path(ctx, library, embeddings=FakeEmbeddings())
    (library / "sub" / "b.md").unlink()
    kept = ingest_path(ctx, library, embeddings=FakeEmbeddings())
    assert kept.pruned == [] and any(m["source"] == "sub/b.md" for m in _rows(ctx).values())
    pruned = ingest_path(ctx, library, prune=True, embeddings=FakeEmbeddings())
    assert pruned.pruned == ["sub/b.md"] and pruned.chunks_pruned > 0
    assert {m["source"] for m in _rows(ctx).values()} == {"a.md", "c.txt", "d.pdf"}


def test_prune_keeps_files_that_failed_to_load(library: Path, ctx: Context) -> None:
    ingest_path(ctx, library, embeddings=FakeEmbeddings())
    (library / "d.pdf").write_bytes(b"%PDF-1.4\ntruncated")
    summary = ingest_path(ctx, library, prune=True, embeddings=FakeEmbeddings())
    assert summary.files_failed == 1 and summary.pruned == []
    assert any(m["source"] == "d.pdf" for m in _rows(ctx).values())


def test_single_file_and_other_collection(library: Path, ctx: Context) -> None:
    summary = ingest_path(ctx, library / "sub" / "b.md", collection="notes", embeddings=None)
    assert summary.files_ok == 1
    assert {m["source"] for m in _rows(ctx, "notes").values()} == {"b.md"}
    with pytest.raises(IngestError) as info:
        ingest_path(ctx, library / "a.md", prune=True, embeddings=FakeEmbeddings())
    assert info.value.exit_code == 2


# --- the CLI -----------------------------------------------------------------------------------


def _parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


@pytest.fixture
def fake_model(monkeypatch: pytest.MonkeyPatch) -> FakeEmbeddings:
    """Route the CLI's `make_embeddings` to one shared fake."""
    fake = FakeEmbeddings()
    monkeypatch.setattr(indexer, "make_embeddings", lambda *a, **k: fake)
    return fake


def test_cli_bad_inputs_are_reported_and_the_rest_ingested(
    library: Path,
    tmp_path: Path,
    make_pdf: Callable[..., bytes],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_model: FakeEmbeddings,
) -> None:
    home = tmp_path / "home"
    assert cli.run(_parse(["ingest", str(library), "--home", str(home)])) == 0
    ctx = Context(home=home)
    before_d = {c for c, m in _rows(ctx).items() if m["source"] == "d.pdf"}
    capsys.readouterr()

    # d.pdf (indexed above) turns corrupt; new bad files appear next to good ones
    (library / "d.pdf").write_bytes(make_pdf(["x " * 300])[:350])
    (library / "empty.pdf").write_bytes(b"")
    (library / "fake.pdf").write_text("just text with a .pdf name", encoding="utf-8")
    from pypdf import PdfReader, PdfWriter

    locked = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(["Secret. " * 30]))))
    locked.encrypt("pw", algorithm="AES-256")
    with open(library / "locked.pdf", "wb") as fh:
        locked.write(fh)
    blank = PdfWriter()
    blank.add_blank_page(612, 792)
    with open(library / "scan.pdf", "wb") as fh:
        blank.write(fh)
    (library / "secret.md").write_text("# Secret\n\nhidden words\n", encoding="utf-8")
    (library / "new.md").write_text(_doc("transformers"), encoding="utf-8")

    real_read = loaders._read_raw

    def read(path: Path) -> bytes:
        if path.name == "secret.md":
            raise PermissionError(13, "Permission denied", str(path))
        return real_read(path)

    monkeypatch.setattr(loaders, "_read_raw", read)
    code = cli.run(_parse(["ingest", str(library), "--home", str(home)]))
    out, err = capsys.readouterr()
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    expected = {
        "d.pdf": "corrupt PDF",
        "empty.pdf": "empty file (0 bytes)",
        "fake.pdf": "not a PDF",
        "locked.pdf": "encrypted PDF",
        "scan.pdf": "no extractable text",
        "secret.md": "permission denied",
    }
    assert len(errors) == len(expected), err
    for name, reason in expected.items():
        assert any(line.startswith(f"error: {name}: ") and reason in line for line in errors), name
    assert "1 file(s) indexed, 3 unchanged, 6 failed" in out
    rows = _rows(ctx)
    assert any(m["source"] == "new.md" for m in rows.values())
    assert {c for c, m in rows.items() if m["source"] == "d.pdf"} == before_d  # untouched


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["ingest", "{tmp}/nope"], 2, "no such file or folder"),
        (["ingest", "{tmp}/empty_dir"], 1, "no documents to ingest"),
        (["ingest", "{tmp}/doc.docx"], 2, "unsupported file type '.docx'"),
        (["ingest", "{tmp}/one.md", "--prune"], 2, "--prune needs a folder"),
        (["ingest", "{tmp}/one.md", "--chunk-size", "300", "--chunk-overlap", "300"], 2, "overlap"),
        (["ingest", "{tmp}/one.md", "--collection", "x"], 2, "bad collection name"),
        (["ingest", "{tmp}/one.md", "--collection", "my books"], 2, "bad collection name"),
    ],
)
def test_cli_usage_errors(
    argv: list[str],
    code: int,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fake_model: FakeEmbeddings,
) -> None:
    (tmp_path / "empty_dir").mkdir()
    (tmp_path / "doc.docx").write_bytes(b"PK")
    (tmp_path / "one.md").write_text("# One\n\nSome words here for a chunk.\n", encoding="utf-8")
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv] + ["--home", str(tmp_path / "h")]
    assert cli.run(_parse(args)) == code
    err = capsys.readouterr().err
    assert message in err and err.startswith("crag ingest: error: ")
    assert fake_model.calls == 0


def test_cli_rejects_tiny_chunk_size(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        _parse(["ingest", "x", "--chunk-size", "10"])
    assert info.value.code == 2
    assert "at least 100" in capsys.readouterr().err


def test_cli_json_summary(
    library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_model: FakeEmbeddings
) -> None:
    argv = ["ingest", str(library), "--home", str(tmp_path / "h"), "--json", "-q"]
    assert cli.run(_parse(argv)) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert summary["files_ok"] == 4 and summary["exit_code"] == 0
    assert summary["chunks_embedded"] == fake_model.texts
    assert err == ""


def test_second_writer_is_refused(library: Path, ctx: Context) -> None:
    from crag.ingest.indexer import _home_lock

    with _home_lock(ctx), pytest.raises(IngestError, match="another `crag ingest`"):
        ingest_path(ctx, library, embeddings=FakeEmbeddings())


def test_a_second_writer_to_one_chroma_server_is_refused(tmp_path: Path) -> None:
    """The lock is taken before the server is reached, so no server is needed here."""
    from crag.ingest.indexer import _home_lock

    server = Context(home=tmp_path, chroma_url="http://127.0.0.1:9")
    with _home_lock(server):
        busy = pytest.raises(IngestError, match=r"is writing to http://127\.0\.0\.1:9")
        with busy, _home_lock(server):
            pass
        with _home_lock(server.with_overrides(chroma_url="http://127.0.0.1:10")):
            pass  # another server: another lock


def test_progress_lines_and_summary(library: Path, ctx: Context) -> None:
    log = io.StringIO()
    progress = Progress(log, live=False)
    (library / "bad.pdf").write_bytes(b"")
    summary = ingest_path(ctx, library, embeddings=FakeEmbeddings(), on_event=progress)
    lines = log.getvalue().splitlines()
    assert "error: bad.pdf: empty file (0 bytes)" in lines
    assert any(line.startswith("[") and "a.md: indexed" in line for line in lines)
    text = format_summary(summary.to_dict())
    assert "4 file(s) indexed, 0 unchanged, 1 failed" in text

    tty = io.StringIO()
    ingest_path(ctx, library, embeddings=FakeEmbeddings(), on_event=Progress(tty, live=True))
    assert "\r" in tty.getvalue() and "files" in tty.getvalue()
