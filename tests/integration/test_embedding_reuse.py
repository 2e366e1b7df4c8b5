"""Retrieved chunks carry their stored vectors, so grading does not re-run the model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crag.context import Context
from crag.ingest.indexer import ingest_path
from crag.models.embeddings import make_embeddings
from crag.models.minilm import MiniLMEmbeddings
from crag.models.remembering import Remembering
from crag.retrieval.library import retrieve

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_remembered_vectors_skip_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    model = MiniLMEmbeddings(threads=1)
    remembering = Remembering(model)
    fresh = model.embed_array(["alpha beta", "gamma delta"])
    remembering.remember(["alpha beta"], [fresh[0].tolist()])
    seen: list[list[str]] = []
    embed = model.embed_documents
    monkeypatch.setattr(model, "embed_documents", lambda texts: seen.append(texts) or embed(texts))
    again = remembering.embed_documents(["alpha beta", "gamma delta"])
    assert seen == [["gamma delta"]]  # only the unknown text went through the model
    assert np.allclose(again, fresh, atol=1e-6)


def test_retrieval_primes_the_grader_with_the_stored_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = Context(home=tmp_path)
    assert ingest_path(ctx, SAMPLES / "library", collection="books").exit_code == 0
    hits = retrieve(ctx, "books", "How long is the refund window for annual plans?", 3)
    embedder = make_embeddings("local")
    texts = [h["text"] for h in hits]
    seen: list[list[str]] = []
    monkeypatch.setattr(embedder.inner, "embed_documents", lambda t: seen.append(t) or [])
    stored = embedder.embed_documents(texts)  # served from what retrieve remembered
    assert seen == []
    computed = MiniLMEmbeddings(threads=1).embed_array(texts)
    assert np.allclose(stored, computed, atol=1e-4)
