"""The Chroma store helpers: cosine collections, recorded embeddings, retrieve()."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeEmbeddings

from crag.context import Context
from crag.errors import DamagedStore, StoreError
from crag.ingest.indexer import ingest_path
from crag.retrieval import clients
from crag.retrieval.clients import EMBEDDINGS_KEY, drop_collection, get_collection, open_client
from crag.retrieval.library import (
    TEXT_KEY,
    describe,
    iter_records,
    retrieve,
    retrieve_many,
    to_similarity,
)
from crag.retrieval.library_index import LibraryIndex, library_index
from crag.retrieval.store_errors import store_error
from crag.retrieval.tenancy import library_version
from crag.text import times_named

DOCS = {
    "dropout.md": "# Dropout\n\nDropout zeroes out a random fraction of hidden units during "
    "training, which regularizes the network and reduces overfitting.\n",
    "adam.md": "# Adam\n\nAdam is an optimizer that keeps running averages of the gradient and "
    "of its square to adapt the learning rate of every parameter.\n",
    "pooling.md": "# Pooling\n\nMax pooling takes the largest value in each window of a "
    "feature map, making convolutional networks less sensitive to small shifts.\n",
}


@pytest.fixture
def ctx(tmp_path: Path) -> Context:
    return Context(home=tmp_path / "home")


@pytest.fixture
def small_library(tmp_path: Path) -> Path:
    lib = tmp_path / "lib"
    lib.mkdir()
    for name, text in DOCS.items():
        (lib / name).write_text(text, encoding="utf-8")
    return lib


def test_collection_is_cosine_and_has_no_embedding_function(ctx: Context) -> None:
    collection = get_collection(
        open_client(ctx, create=True), "books", create=True, embeddings="local"
    )
    assert collection.configuration_json["hnsw"]["space"] == "cosine"
    assert collection._embedding_function is None  # Chroma's default would download a model
    assert collection.metadata[EMBEDDINGS_KEY] == "local"
    # opening again, with or without the spec, gives the same collection
    assert get_collection(open_client(ctx, create=True), "books").id == collection.id
    assert open_client(ctx, create=True) is open_client(ctx, create=True)


def test_missing_collection_says_how_to_build_it(ctx: Context) -> None:
    with pytest.raises(StoreError, match=r"crag ingest PATH --collection notes"):
        get_collection(open_client(ctx, create=True), "notes")
    with pytest.raises(StoreError, match="does not exist"):
        retrieve(ctx, "books", "anything", 3)


def test_other_distance_or_embeddings_are_refused(ctx: Context) -> None:
    client = open_client(ctx, create=True)
    client.create_collection(
        "euclid", configuration={"hnsw": {"space": "l2"}}, embedding_function=None
    )
    with pytest.raises(StoreError, match="'l2' distance"):
        get_collection(client, "euclid")
    get_collection(client, "books", create=True, embeddings="local")
    with pytest.raises(StoreError, match="built with embeddings 'local'"):
        get_collection(client, "books", create=True, embeddings="openai:text-embedding-3-small")
    other = ctx.with_overrides(embeddings="openai:text-embedding-3-small")
    with pytest.raises(StoreError, match="CRAG_EMBEDDINGS=local"):
        retrieve(other, "books", "query", 3)


def test_similarity_is_clipped_to_unit_range() -> None:
    assert to_similarity(0.0) == 1.0
    assert to_similarity(0.25) == pytest.approx(0.75)
    assert to_similarity(1.6) == 0.0
    assert to_similarity(-1e-7) == 1.0


def test_retrieve_with_the_local_model(ctx: Context, small_library: Path) -> None:
    summary = ingest_path(ctx, small_library)  # the real local embedder
    assert summary.exit_code == 0 and summary.chunks_written == 3
    hits = retrieve(ctx, "books", "Which optimizer adapts the learning rate per parameter?", 5)
    assert len(hits) == 3  # k larger than the collection is fine
    assert hits[0]["metadata"]["source"] == "adam.md"
    assert hits[0]["metadata"]["title"] == "Adam"
    sims = [h["similarity"] for h in hits]
    assert sims == sorted(sims, reverse=True) and all(0.0 <= s <= 1.0 for s in sims)
    assert set(hits[0]) == {"id", "text", "metadata", "similarity"}
    assert "running averages" in hits[0]["text"]

    # several queries in one search of the store: each gets what it would alone
    questions = ["Which optimizer adapts the learning rate?", "max pooling", "dropout"]
    together = retrieve_many(ctx, "books", questions, 2)
    assert together == [retrieve(ctx, "books", q, 2) for q in questions]
    assert [hits[0]["metadata"]["source"] for hits in together] == [
        "adam.md",
        "pooling.md",
        "dropout.md",
    ]

    only = retrieve(ctx, "books", "optimizer", 5, where={"source": "pooling.md"})
    assert [h["metadata"]["source"] for h in only] == ["pooling.md"]
    assert retrieve(ctx, "books", "x", 0) == []
    info = describe(ctx, "books")
    assert info["chunks"] == 3 and info["files"] == 3 and info["embeddings"] == "local"


def test_chunks_written_with_their_text_as_the_document_still_read(
    ctx: Context, small_library: Path
) -> None:
    """Stores written before the text moved into the metadata keep it as Chroma's
    document; a reader sees the same hit either way, without the text among its metadata."""
    ingest_path(ctx, small_library)
    question = "Which optimizer adapts the learning rate per parameter?"
    now = retrieve(ctx, "books", question, 3)
    assert "running averages" in now[0]["text"]
    assert all(TEXT_KEY not in hit["metadata"] for hit in now)
    client = open_client(ctx)
    got = get_collection(client, "books").get(include=["metadatas", "embeddings"])
    metas = [dict(m or {}) for m in got["metadatas"] or []]
    texts = [m.pop(TEXT_KEY) for m in metas]
    old = get_collection(client, "older", create=True, embeddings="local")
    old.add(ids=got["ids"], embeddings=got["embeddings"], metadatas=metas, documents=texts)
    assert retrieve(ctx, "older", question, 3) == now
    assert sorted(r.text for r in iter_records(old, texts=True)) == sorted(texts)


def test_mentions_count_how_often_one_chunk_names_a_phrase(ctx: Context) -> None:
    collection = get_collection(
        open_client(ctx, create=True), "books", create=True, embeddings="local"
    )
    collection.add(
        ids=["a", "b", "c"],
        embeddings=[[1.0] + [0.0] * 383] * 3,
        documents=[
            "Batch normalization rescales activations. Batch-normalization layers keep "
            "running averages; batch normalizations differ in training and prediction.",
            "A residual connection followed by layer normalization.",
            "Its cousin, Layer Normalization, is covered elsewhere.",
        ],
        metadatas=[{"tenant": "default"}] * 3,  # every chunk names its tenant
    )
    index = library_index(ctx, "books")
    counts = {
        p: index.most_mentions(p) for p in ["batch normalization", "layer normalization", "GMM"]
    }
    assert counts == {"batch normalization": 3, "layer normalization": 1, "GMM": 0}
    assert index.most_mentions("") == 0


def test_a_phrase_is_counted_in_every_spelling_a_substring_search_keeps() -> None:
    index = LibraryIndex(["The ℓ_2 penalty shrinks weights.", "No penalty here.", "L 2 penalty"])
    assert [index.most_mentions(p) for p in ("l2 penalty", "L2-penalty", "l3 penalty")] == [1, 1, 0]


def test_a_british_or_american_spelling_or_a_participle_meets_the_library_s_word() -> None:
    """A reader who writes "normalisation" asks about what an American book calls
    "normalization" (and the reverse); "convolved" is met by "convolve". An -ing form is
    not its verb: a library that says "boost" does not know "boosting"."""
    index = LibraryIndex(
        [
            "Batch normalization re-centres activations; regularizers shrink weights.",
            "We convolve the image with a kernel of the right colour.",
            "Ensembles boost accuracy.",
        ]
    )
    terms = ("normalisations", "regulariser", "batch-normalisation", "centers", "color")
    for term in (*terms, "convolved"):
        assert index.mentions(term), term
    assert not index.mentions("boosting")
    assert not index.mentions("layer-normalisation")
    assert times_named("batch normalisation", "Batch normalization, batch-normalisation") == 2
    assert times_named("colour normalisation", "color normalization") == 1
    assert times_named("layer normalisation", "batch normalization") == 0
    # a phrase is found in the spelling it is written in, whatever the library's first
    mixed = ["Batch normalization helps.", "Batch normalization again.", "'normalisation'"]
    assert LibraryIndex(mixed).mentions("batch-normalisation")


def test_a_long_word_typed_with_one_slip_meets_a_word_of_several_chunks() -> None:
    """ "dropuot" (two letters swapped) is the library's "dropout"; a word the library
    writes in one chunk only ("boasting") mends no slip ("boosting" stays unknown), and
    a short or capitalised word is not read as a slip."""
    index = LibraryIndex(
        [
            "Dropout zeroes activations.",
            "With dropout, a network overfits less.",
            "A model boasting many parameters.",
            "Our model has layers.",
            "More layers.",
        ]
    )
    assert index.mentions("dropuot") and index.mentions("droppout")
    assert index.mentions("dropuots")  # a slip of the plural
    assert not index.mentions("boosting")
    assert not index.mentions("Dropuot")
    assert not index.mentions("layrs")
    # names a letter apart are other names, however often the library writes its own
    twice = LibraryIndex(["ResNet is deep.", "A ResNet block.", "A wavelet.", "Wavelet bases."])
    assert not twice.mentions("resnext") and not twice.mentions("wavenet")


def test_readers_reuse_a_handle_briefly_and_see_this_process_s_changes_at_once(
    ctx: Context, small_library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ingest_path(ctx, small_library, collection="books").exit_code == 0
    client = open_client(ctx)
    handle = get_collection(client, "books")
    assert get_collection(client, "books") is handle  # one question opens it several times
    before = library_version(ctx, "books")
    (small_library / "dropout.md").write_text("Dropout zeroes activations at random.")
    assert ingest_path(ctx, small_library, collection="books").exit_code == 0
    assert library_version(ctx, "books") != before  # an ingest in this process: seen at once
    monkeypatch.setattr(clients, "HANDLE_TTL_S", 0.0)  # another process's: seen after the TTL
    assert get_collection(client, "books") is not handle


def test_a_handle_opened_while_the_collection_changed_is_not_reused(
    ctx: Context, small_library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ingest_path(ctx, small_library, collection="books").exit_code == 0
    client, opened = open_client(ctx), clients._open_collection

    def changed_meanwhile(*args: Any, **kwargs: Any) -> Any:
        handle = opened(*args, **kwargs)
        clients.forget_handles()  # an ingest in another thread marked a new version
        return handle

    monkeypatch.setattr(clients, "_open_collection", changed_meanwhile)
    first = get_collection(client, "books")
    monkeypatch.undo()
    assert get_collection(client, "books") is not first


def test_empty_collection_retrieves_nothing(ctx: Context) -> None:
    get_collection(open_client(ctx, create=True), "books", create=True, embeddings="local")
    assert retrieve(ctx, "books", "anything", 5) == []


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_server_is_a_clear_error(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    ctx = Context(home=tmp_path, chroma_url=url)
    started = time.perf_counter()
    with pytest.raises(StoreError) as info:
        open_client(ctx, create=True)
    assert url in str(info.value) and "chroma run" in str(info.value)
    assert time.perf_counter() - started < 10
    with pytest.raises(StoreError, match="invalid Chroma URL"):
        open_client(Context(home=tmp_path, chroma_url="ftp://nowhere"))


def test_ingest_writes_no_model_when_nothing_changed(ctx: Context, small_library: Path) -> None:
    ingest_path(ctx, small_library, embeddings=FakeEmbeddings(dim=384))
    again = FakeEmbeddings(dim=384)
    assert ingest_path(ctx, small_library, embeddings=again).files_unchanged == 3
    assert again.calls == 0


def test_asking_a_library_that_was_never_ingested_creates_nothing(tmp_path: Path) -> None:
    ctx = Context(home=tmp_path / "never")
    with pytest.raises(StoreError, match=r"no library at .*crag ingest PATH"):
        retrieve(ctx, "books", "anything", 3)
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: OSError(28, "No space left on device"), "no room to write"),
        (lambda: PermissionError(13, "Permission denied"), "cannot write to"),
        (
            lambda: _chroma(
                "error returned from database: (code: 8) attempt to write a readonly database"
            ),
            "make the folder writable",
        ),
        (
            lambda: _chroma("error returned from database: (code: 26) file is not a database"),
            "chroma.sqlite3 is damaged",
        ),
        (
            lambda: _chroma("Error creating hnsw segment reader: Error loading hnsw index"),
            "vector index of collection 'notes'",
        ),
        (
            lambda: _chroma("Collection expecting embedding with dimension of 64, got 384"),
            "another embedding model",
        ),
        (lambda: ConnectionRefusedError(111, "Connection refused"), "lost the Chroma server"),
    ],
)
def test_store_failures_name_their_cause_and_fix(
    make: Callable[[], BaseException], expected: str, tmp_path: Path
) -> None:
    problem = store_error(make(), str(tmp_path), "notes")
    assert isinstance(problem, StoreError) and expected in str(problem)
    assert "\n" not in str(problem)
    if "damaged" in expected or "vector index" in expected:
        assert isinstance(problem, DamagedStore) and "--collection notes --rebuild" in str(problem)
    assert store_error(KeyError("a bug of crag's"), str(tmp_path)) is None  # keeps its traceback


def _chroma(message: str) -> Exception:
    from chromadb.errors import InternalError

    return InternalError(message)


def test_an_ingest_seals_the_index_and_a_rebuild_starts_over(
    ctx: Context, small_library: Path
) -> None:
    summary = ingest_path(ctx, small_library, embeddings=FakeEmbeddings(dim=384))
    seals = json.loads((ctx.store.home / "chroma.integrity.json").read_text())["collections"]
    assert summary.exit_code == 0 and seals["books"]["collection"]
    client = open_client(ctx)
    assert drop_collection(client, "notes") is False  # nothing to drop
    again = ingest_path(ctx, small_library, rebuild=True, embeddings=FakeEmbeddings(dim=384))
    assert again.files_ok == 3 and again.chunks_written == 3  # everything ingested again
    new = json.loads((ctx.store.home / "chroma.integrity.json").read_text())["collections"]["books"]
    assert new["collection"] != seals["books"]["collection"]
    assert describe(ctx, "books")["chunks"] == 3
