"""`openai:<model>` providers work against any OpenAI-compatible server (here a fake one)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from fake_openai import FakeOpenAI, fake_vector

from crag.context import Context
from crag.errors import ProviderError
from crag.models.chat import make_chat_model
from crag.models.embeddings import make_embeddings


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    yield server
    server.stop()


def test_chat(fake: FakeOpenAI) -> None:
    llm = make_chat_model("openai:test-model", Context(chat_timeout_s=5), max_tokens=50)
    assert make_chat_model("openai:test-model", Context(chat_timeout_s=5), max_tokens=50) is llm
    msg = llm.invoke("What is the capital of Freedonia?")
    assert msg.content == fake.reply
    path, body, _ = fake.requests[-1]
    assert path == "/v1/chat/completions"
    assert body["model"] == "test-model" and body["temperature"] == 0
    assert body["messages"][-1]["content"] == "What is the capital of Freedonia?"


def test_chat_logprobs_shape(fake: FakeOpenAI) -> None:
    """The judge reads P(yes) the same way from ChatOpenAI and the local model."""
    llm = make_chat_model("openai:test-model", Context(chat_timeout_s=5))
    msg = llm.bind(logprobs=True, top_logprobs=2, max_tokens=1).invoke("relevant?")
    assert fake.requests[-1][1]["top_logprobs"] == 2
    top = msg.response_metadata["logprobs"]["content"][0]["top_logprobs"]
    p = {t["token"]: math.exp(t["logprob"]) for t in top}
    assert p["yes"] == pytest.approx(fake.p_yes)


def test_embeddings(fake: FakeOpenAI) -> None:
    emb = make_embeddings("openai:test-emb", timeout_s=5)
    docs = emb.embed_documents(["alpha", "beta"])
    assert docs[0] == pytest.approx(fake_vector("alpha"), abs=1e-6)
    assert docs[1] == pytest.approx(fake_vector("beta"), abs=1e-6)
    assert emb.embed_query("gamma") == pytest.approx(fake_vector("gamma"), abs=1e-6)
    assert fake.requests[-1][1]["model"] == "test-emb"
    assert fake.requests[-1][2]["authorization"] == f"Bearer {fake.api_key}"


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="OPENAI_API_KEY"):
        make_chat_model("openai:test-model", Context())
    with pytest.raises(ProviderError, match="OPENAI_API_KEY"):
        make_embeddings("openai:test-emb")


def test_bad_specs() -> None:
    with pytest.raises(ProviderError, match="openai:<model>"):
        make_chat_model("anthropic:claude", Context())
    with pytest.raises(ProviderError, match="extractive"):
        make_chat_model("extractive", Context())
    with pytest.raises(ProviderError):
        make_chat_model("openai:", Context())
