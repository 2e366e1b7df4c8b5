"""What goes to an `openai:` model on another machine is masked (question, history,
sources); a server on loopback gets the text as it is. The state records the kinds.

The fake OpenAI server listens on loopback; "another machine" is simulated by making
`leaves_machine` say so, which is exactly the decision under test elsewhere
(`test_what_leaves_the_machine`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from tenants import ACME, write_tenant

import crag.models.chat
import crag.models.embeddings
from crag.api import ask, summary
from crag.context import Context
from crag.ingest.indexer import ingest_path
from crag.models.chat import make_chat_model
from crag.models.embeddings import make_embeddings
from crag.models.openai import leaves_machine
from crag.redact import collecting

SECRET = "jane.doe@example.com"
KEY = "sk-abcdefghijklmnop0123456789"
TEXT = f"Write to {SECRET} with the key {KEY}: what is the refund window?"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    yield server
    server.stop()


@pytest.fixture
def remote(monkeypatch: pytest.MonkeyPatch) -> None:
    """The OpenAI server counts as another machine."""
    monkeypatch.setattr(crag.models.chat, "leaves_machine", lambda: True)
    monkeypatch.setattr(crag.models.embeddings, "leaves_machine", lambda: True)


@pytest.mark.parametrize(
    ("url", "leaves"),
    [
        (None, True),  # OpenAI's own
        ("https://api.openai.com/v1", True),
        ("http://10.0.0.5:8000/v1", True),
        ("http://llm.internal:8080/v1", True),  # a name: resolved elsewhere
        ("http://127.0.0.1:8080/v1", False),
        ("http://127.3.2.1:8080/v1", False),
        ("http://localhost:11434/v1", False),
        ("http://[::1]:8080/v1", False),
        ("localhost:8080", False),
    ],
)
def test_what_leaves_the_machine(
    url: str | None, leaves: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if url is None:
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    else:
        monkeypatch.setenv("OPENAI_BASE_URL", url)
    assert leaves_machine() is leaves


def _sent(fake: FakeOpenAI) -> str:
    return json.dumps([body for _, body, _ in fake.requests])


def test_a_remote_chat_model_gets_masked_messages(fake: FakeOpenAI, remote: None) -> None:
    model = make_chat_model("openai:remote-chat", Context(chat_timeout_s=5), max_tokens=20)
    with collecting() as kinds:
        model.invoke(TEXT)
    assert SECRET not in _sent(fake) and KEY not in _sent(fake)
    assert "[email]" in _sent(fake) and kinds == ["email", "api key"]
    # redact_queries off: a trusted provider gets the text as it is
    trusted = make_chat_model("openai:remote-chat", Context(redact_queries=False, chat_timeout_s=5))
    trusted.invoke(TEXT)
    assert SECRET in json.dumps(fake.requests[-1][1])


def test_a_loopback_server_gets_the_text_as_it_is(fake: FakeOpenAI) -> None:
    model = make_chat_model("openai:local-chat", Context(chat_timeout_s=5), max_tokens=20)
    with collecting() as kinds:
        model.invoke(TEXT)
        make_embeddings("openai:local-emb", timeout_s=5, redact=True).embed_query(TEXT)
    assert _sent(fake).count(SECRET) == 2 and kinds == []


def test_remote_embeddings_get_masked_text(fake: FakeOpenAI, remote: None) -> None:
    embedder = make_embeddings("openai:remote-emb", timeout_s=5, redact=True)
    with collecting() as kinds:
        embedder.embed_query(TEXT)
        embedder.embed_documents([f"call {SECRET}", "nothing personal"])
    assert SECRET not in _sent(fake) and KEY not in _sent(fake)
    assert kinds == ["email", "api key"]
    assert "nothing personal" in _sent(fake)  # only the secrets go
    make_embeddings("openai:remote-emb", timeout_s=5).embed_query(TEXT)  # redact off
    assert SECRET in json.dumps(fake.requests[-1][1])


def test_a_run_records_what_its_model_calls_masked(
    fake: FakeOpenAI, remote: None, tmp_path: Path
) -> None:
    library, _ = write_tenant(tmp_path / "docs", ACME)
    home = tmp_path / "home"
    assert ingest_path(Context(home=home), library).exit_code == 0
    question = f"How long is the refund window for annual plans? Reply to {SECRET}"
    ctx = Context(home=home, chat_model="openai:remote-chat", grader="features", external="none")
    state = ask(question, context=ctx, thread_id="t")
    assert fake.requests and SECRET not in _sent(fake)
    assert state["question"] == question  # the user's own question is kept as asked
    assert "email" in state["redacted"] and "email" in summary(state)["redacted"]
    assert SECRET not in json.dumps(state["redacted"])
    # a new run on the same thread starts with nothing masked
    plain = ask("How long is the refund window for annual plans?", context=ctx, thread_id="t")
    assert plain["redacted"] == []
