"""The indexer: incremental re-runs, replaced files, crashes, pruning, bad inputs, CLI.

These use a fast fake embedder (the model is irrelevant here); retrieval quality
with the real model is in test_ingest_retrieval.py.
"""

from __future__ import annotations

import argparse
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeEmbeddings

from crag.cli import ingest as cli
from crag.cli.main import build_parser
from crag.context import Context
from crag.errors import IngestError
from crag.ingest import indexer, loaders
from crag.ingest.chunking import chunk_pages
from crag.ingest.discovery import discover
from crag.ingest.indexer import ingest_path
from crag.ingest.loaders import load_document
from crag.ingest.progress import Progress, format_summary
from crag.ingest.stored import chunk_id
from crag.models.remembering import STRIPS_KEY
from crag.retrieval.clients import get_collection, open_client
from crag.retrieval.library import TEXT_KEY, unpacked

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
    collection = get_collection(open_client(ctx), name or ctx.store.collection)
    got = collection.get(include=["metadatas", "documents"])
    rows = {}
    for cid, stored, doc in zip(
        got["ids"], got["metadatas"] or [], got["documents"] or [], strict=True
    ):
        rows[cid] = {**stored, "_document": doc, "_text": unpacked(doc, stored)[0]}
    return rows


def _expected_chunks(path: Path, ctx: Context) -> int:
    doc = load_document(path)
    return len(chunk_pages(doc.pages, doc.kind, ctx.store.chunk_size, ctx.store.chunk_overlap))


def test_discover_walks_recursively_and_skips_hidden_and_unsupported(library: Path) -> None:
    found = discover(library)
    assert [found.source(f) for f in found.files] == ["a.md", "c.txt", "d.pdf", "sub/b.md"]


def test_ingest_then_rerun_adds_and_embeds_nothing(library: Path, ctx: Context) -> None:
    fake = FakeEmbeddings()
    first = ingest_path(ctx, library, embeddings=fake)
    assert first.exit_code == 0 and first.files_ok == 4
    rows = _rows(ctx)
    expected = sum(_expected_chunks(p, ctx) for p in discover(library).files)
    assert len(rows) == expected == first.chunks_written
    # each chunk once, and nothing else: strips are embedded when a question reads them
    assert fake.texts == len(rows)
    assert fake.calls > 0

    for meta in rows.values():
        for key in ("source", "title", "chunk", "content_hash", "file_hash", "version", "chunks"):
            assert key in meta
        assert meta["content_hash"] == loaders.sha256_hex(meta["_text"])
        assert STRIPS_KEY not in meta
        # the text is in the metadata: Chroma indexes a document for full-text search
        assert meta[TEXT_KEY] == meta["_text"] and meta["_document"] is None
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
    known = {m["content_hash"] for m in before.values()}
    fresh = {after[c]["content_hash"]: after[c]["_text"] for c in new_a}.items()
    fresh_texts = [t for h, t in fresh if h not in known]
    assert 0 < len(fresh_texts) < report.chunks
    assert report.reused == report.chunks - len(fresh_texts)
    assert fake.texts == len(fresh_texts)


def test_changed_chunking_reindexes(library: Path, ctx: Context) -> None:
    ingest_path(ctx, library, embeddings=FakeEmbeddings())
    smaller = ctx.with_overrides(chunk_size=200, chunk_overlap=20)
    summary = ingest_path(smaller, library, embeddings=FakeEmbeddings())
    assert summary.files_ok == 4 and summary.files_unchanged == 0
    expected = sum(_expected_chunks(p, smaller) for p in discover(library).files)
    assert len(_rows(ctx)) == expected


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


def test_a_subfolder_ingested_again_keeps_its_names_and_prunes_only_itself(
    library: Path, ctx: Context
) -> None:
    ingest_path(ctx, library, embeddings=FakeEmbeddings())
    before = _rows(ctx)
    again = ingest_path(ctx, library / "sub", prune=True, embeddings=FakeEmbeddings())
    assert [(f.source, f.status) for f in again.files] == [("sub/b.md", "unchanged")]
    assert again.pruned == [] and _rows(ctx) == before  # the rest of the library stays
    one = ingest_path(ctx, library / "sub" / "b.md", embeddings=FakeEmbeddings())
    assert [(f.source, f.status) for f in one.files] == [("sub/b.md", "unchanged")]
    (library / "sub" / "new.md").write_text(_doc(TOPICS[5]), encoding="utf-8")
    (library / "sub" / "b.md").unlink()
    pruned = ingest_path(ctx, library / "sub", prune=True, embeddings=FakeEmbeddings())
    assert pruned.pruned == ["sub/b.md"]
    assert {m["source"] for m in _rows(ctx).values()} == {"a.md", "c.txt", "d.pdf", "sub/new.md"}


def test_two_folders_never_replace_each_others_files(tmp_path: Path, ctx: Context) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, topic in ((first, TOPICS[0]), (second, TOPICS[1])):
        folder.mkdir()
        (folder / "notes.md").write_text(_doc(topic), encoding="utf-8")
    (second / "other.md").write_text(_doc(TOPICS[2]), encoding="utf-8")
    ingest_path(ctx, first, embeddings=FakeEmbeddings())
    kept = _rows(ctx)
    summary = ingest_path(ctx, second, prune=True, embeddings=FakeEmbeddings())
    (clash,) = [f for f in summary.files if f.status == "failed"]
    assert clash.source == "notes.md" and str(first / "notes.md") in clash.reason
    assert "--collection" in clash.reason and summary.pruned == []
    rows = _rows(ctx)
    assert {cid: m for cid, m in rows.items() if m["source"] == "notes.md"} == kept
    assert {m["source"] for m in rows.values()} == {"notes.md", "other.md"}
    # a folder moved away is no other folder: its files are replaced
    first.rename(tmp_path / "moved")
    replaced = ingest_path(ctx, second, embeddings=FakeEmbeddings())
    assert [f.status for f in replaced.files] == ["updated", "unchanged"]


def test_prune_keeps_the_files_of_a_folder_that_could_not_be_listed(
    library: Path, ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest_path(ctx, library, embeddings=FakeEmbeddings())
    real_walk = os.walk

    def walk(top: Any, onerror: Any = None, **kwargs: Any) -> Any:
        for dirpath, dirnames, filenames in real_walk(top, onerror=onerror, **kwargs):
            if "sub" in dirnames:  # as os.walk does when listing it is refused
                dirnames.remove("sub")
                onerror(PermissionError(13, "Permission denied", str(Path(dirpath) / "sub")))
            yield dirpath, dirnames, filenames

    monkeypatch.setattr("crag.ingest.discovery.os.walk", walk)
    summary = ingest_path(ctx, library, prune=True, embeddings=FakeEmbeddings())
    assert summary.files_failed == 1 and summary.pruned == []
    assert any(m["source"] == "sub/b.md" for m in _rows(ctx).values())


def test_a_linked_folder_outside_the_tree_is_read_and_one_inside_it_is_not_read_twice(
    library: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "e.md").write_text(_doc(TOPICS[5]), encoding="utf-8")
    (outside / "again").symlink_to(outside)  # a loop: walked once
    (library / "linked").symlink_to(outside)
    (library / "sub" / "up").symlink_to(library)  # the tree itself: its files are read once
    found = discover(library)
    assert [found.source(f) for f in found.files] == [
        "a.md",
        "c.txt",
        "d.pdf",
        "linked/e.md",
        "sub/b.md",
    ]


def test_a_rebuild_whose_embedder_fails_drops_nothing(library: Path, ctx: Context) -> None:
    ingest_path(ctx, library, embeddings=FakeEmbeddings())
    before = _rows(ctx)
    broken = FakeEmbeddings(fail_after=0, error=RuntimeError("no such model"))
    with pytest.raises(IngestError, match=r"no such model.*nothing was dropped") as info:
        ingest_path(ctx, library, rebuild=True, embeddings=broken)
    assert info.value.exit_code == 2 and _rows(ctx) == before


def _other_folder(tmp_path: Path) -> Path:
    """A second folder with one file, hover.md, that the library does not have."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "hover.md").write_text(_doc(TOPICS[4]), encoding="utf-8")
    return other


def test_a_rebuild_names_what_else_it_would_drop_and_drops_nothing_unforced(
    tmp_path: Path, library: Path, ctx: Context
) -> None:
    other = _other_folder(tmp_path)
    ingest_path(ctx, library, embeddings=FakeEmbeddings())
    ingest_path(ctx, other, embeddings=FakeEmbeddings())
    before = _rows(ctx)
    for path, named in ((library, str(other)), (library / "sub", "outside sub/")):
        with pytest.raises(IngestError, match="nothing was dropped") as info:
            ingest_path(ctx, path, rebuild=True, embeddings=FakeEmbeddings())
        assert named in str(info.value) and "--force" in str(info.value)
        assert info.value.exit_code == 2 and _rows(ctx) == before
    forced = ingest_path(ctx, library, rebuild=True, force=True, embeddings=FakeEmbeddings())
    assert forced.exit_code == 0
    assert "hover.md" not in {m["source"] for m in _rows(ctx).values()}
    again = ingest_path(ctx, library, rebuild=True, embeddings=FakeEmbeddings())
    assert again.exit_code == 0  # the collection holds this folder alone now


def test_prune_keeps_the_files_of_another_folder_moved_away(
    tmp_path: Path, library: Path, ctx: Context
) -> None:
    other = _other_folder(tmp_path)
    ingest_path(ctx, other, embeddings=FakeEmbeddings())
    ingest_path(ctx, library, embeddings=FakeEmbeddings())
    other.rename(tmp_path / "unmounted")  # a mount gone, a folder renamed
    summary = ingest_path(ctx, library, prune=True, embeddings=FakeEmbeddings())
    assert summary.pruned == []
    assert "hover.md" in {m["source"] for m in _rows(ctx).values()}


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
    """Route the CLI's `embeddings_for` to one shared fake."""
    fake = FakeEmbeddings()
    monkeypatch.setattr(indexer, "embeddings_for", lambda *a, **k: fake)
    return fake


def test_cli_json_summary(
    library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_model: FakeEmbeddings
) -> None:
    argv = ["ingest", str(library), "--home", str(tmp_path / "h"), "--json", "-q"]
    assert cli.run(_parse(argv)) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert summary["files_ok"] == 4 and summary["exit_code"] == 0
    assert 0 < summary["chunks_embedded"] == fake_model.texts  # chunks only, not strips
    assert err == ""


def test_cli_json_says_why_a_run_could_not_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_model: FakeEmbeddings
) -> None:
    (tmp_path / "empty").mkdir()
    argv = ["ingest", str(tmp_path / "empty"), "--home", str(tmp_path / "h"), "--json", "-q"]
    code = cli.run(_parse(argv))
    out, err = capsys.readouterr()
    said = json.loads(out)
    assert code != 0 and said["exit_code"] == code and set(said) == {"error", "exit_code"}
    assert "no documents" in said["error"] and err.count("\n") == 1


def test_an_interrupted_run_counts_the_files_it_left(library: Path, ctx: Context) -> None:
    ingestor = indexer.Ingestor(ctx, embeddings=FakeEmbeddings())

    def stop(event: dict[str, Any]) -> None:
        if event["event"] == "file_done":
            raise KeyboardInterrupt

    ingestor.on_event = stop
    with pytest.raises(KeyboardInterrupt):
        ingestor.run(library)
    summary = ingestor.summary
    assert summary.interrupted and len(summary.files) == 1
    assert summary.not_processed == len(discover(library).files) - 1 > 0


def test_a_second_writer_to_one_chroma_server_is_refused(tmp_path: Path) -> None:
    """The lock is taken before the server is reached, so no server is needed here."""
    from crag.ingest.lock import home_lock

    server = Context(home=tmp_path, chroma_url="http://127.0.0.1:9")
    with home_lock(server):
        busy = pytest.raises(IngestError, match=r"is writing to http://127\.0\.0\.1:9")
        with busy, home_lock(server):
            pass
        with home_lock(server.with_overrides(chroma_url="http://127.0.0.1:10")):
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


def test_chunks_carry_their_documents_date_and_kind(tmp_path: Path, ctx: Context) -> None:
    import os

    from crag.retrieval.library import hit_to_passage

    lib = tmp_path / "dated"
    (lib / "forum").mkdir(parents=True)
    (lib / "forum" / "thread.md").write_text(
        "# Sync drops\n\n*Posted on 3 October 2024.*\n\n" + _doc(TOPICS[0]), encoding="utf-8"
    )
    (lib / "page.md").write_text(
        "<!-- source: https://docs.vendor.example/sync -->\n" + _doc(TOPICS[1]), encoding="utf-8"
    )
    (lib / "plain.txt").write_text(_doc(TOPICS[2]).replace("# ", ""), encoding="utf-8")
    os.utime(lib / "plain.txt", (1_700_000_000, 1_700_000_000))  # 2023-11-14
    summary = ingest_path(ctx, lib, embeddings=FakeEmbeddings())
    assert summary.exit_code == 0
    by_source = {m["source"]: m for m in _rows(ctx).values()}
    forum, page, plain = by_source["forum/thread.md"], by_source["page.md"], by_source["plain.txt"]
    assert (forum["date"], forum["dated_by"], forum["source_kind"]) == (
        "2024-10-03",
        "text",
        "forum",
    )
    assert page["source_kind"] == "official" and page["dated_by"] == "file"
    assert (plain["date"], plain["dated_by"]) == ("2023-11-14", "file")  # the last resort
    assert "source_kind" not in plain and plain["kind"] == "text"  # the file type stays
    passage = hit_to_passage({"id": "x", "text": "t", "metadata": forum}, origin="library")
    assert (passage["date"], passage["dated_by"]) == ("2024-10-03", "text")
    assert passage["kind"] == "forum"
    # a chunk from a store ingested before dates were read is undated, not an error
    old = hit_to_passage({"id": "y", "text": "t", "metadata": {"source": "a.pdf"}}, "library")
    assert "date" not in old and "kind" not in old


def test_an_unchanged_re_ingest_trusts_the_manifest_only_while_nothing_was_written(
    library: Path, ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crag.retrieval.integrity import unseal

    first = ingest_path(ctx, library, embeddings=FakeEmbeddings())
    assert first.exit_code == 0 and (ctx.store.home / "chroma.ingested.json").is_file()
    chunks = {f.source: f.chunks for f in first.files}

    def no_store(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the store was opened")

    # nothing changed: every file is reported unchanged, with its chunks, from the manifest
    with monkeypatch.context() as patched:
        patched.setattr(indexer, "open_client", no_store)
        again = ingest_path(ctx, library, embeddings=FakeEmbeddings())
    assert {f.source: (f.status, f.chunks) for f in again.files} == {
        s: ("unchanged", n) for s, n in chunks.items()
    }
    # a changed file, a write the manifest did not see, or a touched index: the store decides
    (library / "a.md").write_text(_doc(TOPICS[5]), encoding="utf-8")
    changed = ingest_path(ctx, library, embeddings=FakeEmbeddings())
    assert [f.source for f in changed.files if f.status != "unchanged"] == ["a.md"]
    unseal(open_client(ctx), ctx.store.collection)  # as an ingest does before it writes
    with monkeypatch.context() as patched:
        patched.setattr(indexer, "open_client", no_store)
        with pytest.raises(AssertionError, match="the store was opened"):
            ingest_path(ctx, library, embeddings=FakeEmbeddings())
    assert ingest_path(ctx, library, embeddings=FakeEmbeddings()).files_unchanged == len(chunks)
    # the chunks the manifest vouches for are the store's
    assert len(_rows(ctx)) == sum(f.chunks for f in changed.files)
