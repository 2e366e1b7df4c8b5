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
    as_array = remembering.embed_array(["alpha beta", "gamma delta"])  # the graders' form
    assert seen == [["gamma delta"]] * 2 and as_array.dtype == np.float32
    assert np.allclose(as_array, fresh, atol=1e-6)


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


def test_retrieval_embeds_strips_once_so_grading_embeds_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ingest embeds chunks only; the first retrieval of a chunk embeds its strips (one
    call), grading then runs no model, and a second read embeds nothing."""
    import asyncio

    from crag.grading.graders import SimilarityGrader
    from crag.models.remembering import strip_texts

    ctx = Context(home=tmp_path)
    assert ingest_path(ctx, SAMPLES / "library", collection="books").exit_code == 0
    embedder = make_embeddings("local")
    embedder._known.clear()  # the process's embedder: forget strips other tests read
    embed = embedder.inner.embed_documents
    seen: list[list[str]] = []
    monkeypatch.setattr(embedder.inner, "embed_documents", lambda t: seen.append(t) or embed(t))
    question = "Which TCP port does the Lumen HTTPS API listen on by default?"
    texts = [h["text"] for h in retrieve(ctx, "books", question, 5)]
    strips = [s for t in texts for s in strip_texts(t, ctx.refinement.strip_sentences)]
    assert len(strips) > len(texts)
    assert len(seen) == 1 and set(seen[0]) == set(strips)  # the strips, in one call
    scores = asyncio.run(SimilarityGrader(embedder, strip_weight=0.5).ascore(question, texts))
    assert len(seen) == 1  # grading ran no model
    retrieve(ctx, "books", question, 5)
    assert len(seen) == 1  # read again: remembered
    kept = embedder.embed_documents(strips)
    monkeypatch.undo()
    computed = MiniLMEmbeddings(threads=1).embed_array(strips)
    assert np.allclose(kept, computed, atol=2e-3)  # float16 precision
    fresh = SimilarityGrader(MiniLMEmbeddings(threads=1), strip_weight=0.5)
    assert np.allclose(scores, asyncio.run(fresh.ascore(question, texts)), atol=5e-3)


def test_batches_run_side_by_side_give_the_vectors_of_one_at_a_time() -> None:
    texts = [f"Sentence {i} about {'dropout ' * (i % 7)}and training." for i in range(40)]
    side_by_side = MiniLMEmbeddings(threads=2, max_batch_tokens=32).embed_array(texts)
    one_by_one = np.stack([MiniLMEmbeddings(threads=1).embed_array([t])[0] for t in texts])
    assert np.allclose(side_by_side, one_by_one, atol=1e-6)


def test_a_forgotten_question_is_embedded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    model = MiniLMEmbeddings(threads=1)
    remembering = Remembering(model)
    asked: list[str] = []
    embed = model.embed_query
    monkeypatch.setattr(model, "embed_query", lambda t: asked.append(t) or embed(t))
    first = remembering.embed_query("What is dropout?")
    assert remembering.embed_query("What is dropout?") == first and asked == ["What is dropout?"]
    remembering.forget_queries()
    assert np.allclose(remembering.embed_query("What is dropout?"), first, atol=1e-6)
    assert asked == ["What is dropout?"] * 2


def test_each_system_of_a_comparison_embeds_its_own_question(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A baseline asked after crag must not be handed crag's question vector: its time
    would lack the embedding that crag's includes."""
    import asyncio

    from crag_lab.progress import Bar
    from crag_lab.runner import run_questions

    ctx = Context(home=tmp_path).with_overrides(chat_model="extractive", cache=False)
    for folder, collection in (("library", "books"), ("external", "external")):
        assert ingest_path(ctx, SAMPLES / folder, collection=collection).exit_code == 0
    question = "How long is the refund window for annual plans?"
    embedder = make_embeddings("local")
    asked: list[str] = []
    embed = embedder.inner.embed_query
    monkeypatch.setattr(embedder.inner, "embed_query", lambda t: asked.append(t) or embed(t))
    row = {"id": "q1", "question": question, "category": "internal", "expected_verdict": "correct"}
    records = asyncio.run(run_questions([row], ctx, ["crag", "naive"], Bar(2, "t", quiet=True)))
    assert [r["error"] for r in (*records["crag"], *records["naive"])] == [None, None]
    assert asked.count(question) == 2
