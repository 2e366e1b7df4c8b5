"""Tenants: ingest, prune, coverage, generated pairs and the CLI act on one tenant only;
a store ingested before tenants existed keeps working as the default tenant's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tenants import ACME, GLOBEX, write_tenant

from crag.cli.main import main
from crag.context import Context
from crag.errors import IngestError
from crag.ingest.indexer import ingest_path
from crag.models.embeddings import make_embeddings
from crag.retrieval.clients import (
    TENANT_KEY,
    TENANTS_KEY,
    get_collection,
    modify_metadata,
    open_client,
)
from crag.retrieval.library import (
    describe,
    iter_records,
    retrieve,
    tenant_records,
)
from crag.retrieval.library_index import missing_terms
from crag.retrieval.tenancy import library_version, tenant_where
from crag_lab.pairs import library_chunks


def _ctx(home: Path, tenant: str) -> Context:
    return Context(home=home, tenant=tenant)


@pytest.fixture
def two_tenants(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    for tenant in (ACME, GLOBEX):
        library, _ = write_tenant(tmp_path / "docs", tenant)
        summary = ingest_path(_ctx(home, tenant.name), library)
        assert summary.exit_code == 0 and summary.tenant == tenant.name
    return home


def test_each_tenant_reads_only_its_own_chunks(two_tenants: Path) -> None:
    acme, globex = _ctx(two_tenants, "acme"), _ctx(two_tenants, "globex")
    question = "Which TCP port does the server listen on by default?"
    assert all("Orbix" in h["text"] for h in retrieve(acme, "books", question, 10))
    assert all("Quillon" in h["text"] for h in retrieve(globex, "books", question, 10))
    # the same file names, stored side by side: other ids, nothing overwritten
    mine = {r.id: r.metadata for r in tenant_records(acme, "books")}
    theirs = {r.id: r.metadata for r in tenant_records(globex, "books")}
    assert not mine.keys() & theirs.keys()
    assert {m["source"] for m in mine.values()} & {m["source"] for m in theirs.values()}
    assert {m[TENANT_KEY] for m in mine.values()} == {"acme"}
    assert describe(acme, "books")["files"] == 3 and describe(globex, "books")["files"] == 3
    # a tenant that never ingested has an empty library, not someone else's
    assert retrieve(_ctx(two_tenants, "initech"), "books", question, 5) == []
    assert library_version(_ctx(two_tenants, "initech"), "books") == "empty"
    assert library_version(acme, "books") != library_version(globex, "books")


def test_coverage_and_generated_pairs_read_the_tenants_library(two_tenants: Path) -> None:
    acme, globex = _ctx(two_tenants, "acme"), _ctx(two_tenants, "globex")
    assert missing_terms(acme, "books", ["Orbix", "Quillon"]) == ["Quillon"]
    assert missing_terms(globex, "books", ["Orbix", "Quillon"]) == ["Orbix"]
    chunks = library_chunks(acme, "books")
    assert chunks and all("Orbix" in c["text"] and "Quillon" not in c["text"] for c in chunks)


def test_ingest_and_prune_touch_only_the_tenants_files(two_tenants: Path, tmp_path: Path) -> None:
    acme, globex = _ctx(two_tenants, "acme"), _ctx(two_tenants, "globex")
    theirs_before = {r.id for r in tenant_records(globex, "books")}
    globex_version = library_version(globex, "books")
    library = tmp_path / "docs" / "acme" / "library"
    (library / "pricing.pdf").unlink()  # globex has a pricing.pdf too
    summary = ingest_path(acme, library, prune=True)
    assert summary.pruned == ["pricing.pdf"] and summary.files_unchanged == 2
    assert {r.metadata["source"] for r in tenant_records(acme, "books")} == {
        "handbook.pdf",
        "security.pdf",
    }
    assert {r.id for r in tenant_records(globex, "books")} == theirs_before
    assert library_version(globex, "books") == globex_version  # their cache stays valid


def test_the_same_file_in_two_tenants_is_embedded_for_each(tmp_path: Path) -> None:
    """A vector is reused only from the tenant's own chunks: reusing another tenant's
    would tell (in the ingest's counts) that it holds the same text."""
    library, _ = write_tenant(tmp_path / "docs", ACME)
    home = tmp_path / "home"
    first = ingest_path(_ctx(home, "acme"), library)
    second = ingest_path(_ctx(home, "globex"), library)
    assert second.chunks_embedded == first.chunks_embedded > 0


def _make_legacy(home: Path, collection: str) -> None:
    """The store as crag wrote it before tenants: no tenant on any chunk or collection."""
    stored = get_collection(open_client(Context(home=home)), collection)
    ids = [r.id for r in iter_records(stored)]
    stored.update(ids=ids, metadatas=[{TENANT_KEY: None}] * len(ids))  # type: ignore[list-item]
    meta = {k: v for k, v in (stored.metadata or {}).items() if k != TENANTS_KEY}
    modify_metadata(stored, {k: v for k, v in meta.items() if not k.startswith("crag_version:")})


def test_a_store_from_before_tenants_is_the_default_tenants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    acme_lib, _ = write_tenant(tmp_path / "docs", ACME)
    globex_lib, _ = write_tenant(tmp_path / "docs", GLOBEX)
    home = tmp_path / "home"
    assert ingest_path(Context(home=home), acme_lib).exit_code == 0
    _make_legacy(home, "books")
    default = Context(home=home)
    question = "How are backups encrypted?"
    assert "Orbix" in retrieve(default, "books", question, 1)[0]["text"]
    assert retrieve(_ctx(home, "globex"), "books", question, 5) == []  # not theirs

    # another tenant's first ingest stamps the old chunks as the default tenant's
    argv = ["ingest", str(globex_lib), "--home", str(home), "--tenant", "globex", "-q"]
    assert main(argv) == 0
    out = capsys.readouterr()
    assert "now belong to the tenant 'default'" in out.err
    assert "ingest into 'books' (tenant 'globex'): 3 file(s) indexed" in out.out
    assert "Orbix" in retrieve(default, "books", question, 1)[0]["text"]
    assert all("Quillon" in h["text"] for h in retrieve(_ctx(home, "globex"), "books", question, 5))
    # the default tenant's files keep their ids: a re-ingest has nothing to do
    again = ingest_path(default, acme_lib)
    assert again.files_unchanged == 3 and again.chunks_embedded == 0


def test_the_cli_answers_for_the_tenant_given(
    two_tenants: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    question = "How long is the refund window for annual plans?"
    # the tenants' toy pages score low by similarity: thresholds low enough to answer
    # from them (what is tested is whose library answers, not the grading)
    base = ["ask", question, "--home", str(two_tenants), "--no-llm", "--external", "none"]
    base += ["--set", "lower=0.3", "--set", "upper=0.3"]
    assert main([*base, "--tenant", "acme", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["tenant"] == "acme" and result["cached"] is False
    assert result["answered"] and "45 days" in result["answer"]
    assert main([*base, "--tenant", "globex", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["tenant"] == "globex" and "21 days" in result["answer"]
    assert "Orbix" not in json.dumps(result)
    assert main([*base, "--tenant", "../acme"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tenant='../acme' (from argument)" in err


def test_a_rebuild_for_one_tenant_leaves_the_others_to_ingest_again(
    two_tenants: Path, tmp_path: Path
) -> None:
    """The vector index is one for all tenants: a rebuild drops it all, so it is refused
    until it is forced (documented)."""
    library = tmp_path / "docs" / "globex" / "library"
    before = len(list(tenant_records(_ctx(two_tenants, "acme"), "books")))
    with pytest.raises(IngestError, match=r"also holds tenant 'acme'.*nothing was dropped"):
        ingest_path(_ctx(two_tenants, "globex"), library, rebuild=True)
    assert len(list(tenant_records(_ctx(two_tenants, "acme"), "books"))) == before > 0
    forced = ingest_path(_ctx(two_tenants, "globex"), library, rebuild=True, force=True)
    assert forced.exit_code == 0
    assert list(tenant_records(_ctx(two_tenants, "acme"), "books")) == []
    assert len(list(tenant_records(_ctx(two_tenants, "globex"), "books"))) > 0
    shutil.rmtree(tmp_path / "docs")


def test_a_lone_tenant_is_queried_without_a_filter_and_still_sees_only_its_own(
    tmp_path: Path,
) -> None:
    """One tenant: a filter matching every chunk would only cost time, so queries go
    unfiltered; a chunk of another tenant written meanwhile (its first ingest racing the
    query) is still dropped from the hits."""
    library, _ = write_tenant(tmp_path / "docs", ACME)
    home = tmp_path / "home"
    acme = _ctx(home, "acme")
    assert ingest_path(acme, library).exit_code == 0
    stored = get_collection(open_client(acme), "books")
    assert tenant_where(stored, "acme") is None
    assert tenant_where(stored, "globex") == {TENANT_KEY: "globex"}
    vector = retrieve(acme, "books", "backups", 1)[0]
    stored.add(
        ids=["theirs"],
        embeddings=[[float(x) for x in make_embeddings("local").embed_query("backups")]],
        documents=["Quillon backups are encrypted with ChaCha20."],
        metadatas=[{TENANT_KEY: "globex", "source": "handbook.pdf"}],
    )
    hits = retrieve(acme, "books", "backups", 10)
    assert hits and all("Quillon" not in h["text"] for h in hits)
    assert hits[0]["id"] == vector["id"]
    # the nearest hit is theirs: the next window of hits is read for one of its own
    assert [h["id"] for h in retrieve(acme, "books", "backups", 1)] == [vector["id"]]
    assert [r.id for r in tenant_records(_ctx(home, "globex"), "books")] == ["theirs"]


def test_a_thread_id_names_another_conversation_for_another_tenant(two_tenants: Path) -> None:
    from crag.api import ask

    knobs = {"chat_model": "extractive", "grader": "features", "external": "none"}
    acme = Context(home=two_tenants, tenant="acme", **knobs)
    globex = Context(home=two_tenants, tenant="globex", **knobs)
    ask("Which TCP port does the server listen on by default?", context=acme, thread_id="t")
    state = ask("How are backups encrypted?", context=globex, thread_id="t")
    said = " ".join(str(m.content) for m in state["messages"])
    assert "Orbix" not in said and "TCP port" not in said
    assert len(state["messages"]) == 2  # globex's question and answer only
