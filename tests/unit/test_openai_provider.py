"""`openai:<model>` providers work against any OpenAI-compatible server (here a fake one)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, fake_vector

from crag.cli.main import build_parser
from crag.cli.options import context_from_args
from crag.context import Context
from crag.errors import ProviderError
from crag.grading.graders import CascadeGrader, SimilarityGrader
from crag.grading.registry import make_grader, make_strip_grader, uses_llm, without_llm
from crag.models.chat import make_chat_model
from crag.models.embeddings import make_embeddings
from crag_lab.graders.mean import MeanGrader


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


QUESTION = "How does dropout regularize a network?"
PASSAGES = ["Dropout zeroes random activations during training.", "Paris is in France."]


def _server_graded(
    fake: FakeOpenAI, tmp_path: Path, **overrides: object
) -> tuple[Context, Any, list[float], list[float], int]:
    """A grader built with a server's chat model: the context, the grader, its offline
    first scores, its scores, and how many requests reached the server for them."""
    ctx = Context(home=tmp_path, chat_model="openai:test-model", chat_timeout_s=5)
    ctx = ctx.with_overrides(**overrides)
    assert uses_llm(ctx)
    grader: Any = make_grader(ctx, library=True)
    assert isinstance(grader.first, SimilarityGrader)
    first = asyncio.run(grader.first.ascore(QUESTION, PASSAGES))
    before = len(fake.requests)
    scores = asyncio.run(grader.ascore(QUESTION, PASSAGES))
    return ctx, grader, first, scores, len(fake.requests) - before


def test_the_mean_judges_every_passage_beside_similarity(fake: FakeOpenAI, tmp_path: Path) -> None:
    """grader=mean: every passage is judged on the server, its score the weighted mean of
    similarity's and the judge's; strips are never judged."""
    ctx, grader, first, scores, asked = _server_graded(
        fake, tmp_path, grader="mean", judge_weight=0.25
    )
    assert isinstance(grader, MeanGrader)
    judged = asyncio.run(grader.judge.ascore(QUESTION, PASSAGES))
    assert asked == len(PASSAGES)
    assert scores == pytest.approx(
        [0.75 * f + 0.25 * j for f, j in zip(first, judged, strict=True)]
    )
    assert scores != pytest.approx(first)
    strips = make_strip_grader(ctx)
    assert isinstance(strips, SimilarityGrader)
    before = len(fake.requests)
    asyncio.run(strips.ascore(QUESTION, PASSAGES))
    assert len(fake.requests) == before  # no strip reached the server


def test_auto_lets_a_server_model_judge_the_uncertain_band(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    """grader=auto is the cascade when the judge would be a model on a server: only the
    passages similarity is unsure of are judged there."""
    ctx, grader, first, scores, asked = _server_graded(fake, tmp_path)
    assert isinstance(grader, CascadeGrader)
    low, high = ctx.grading.cascade_low, ctx.grading.cascade_high
    band = [i for i, s in enumerate(first) if low <= s < high]
    assert band, first  # at least one passage the judge must settle
    assert asked == len(band)
    assert all(scores[i] != first[i] for i in band)
    assert all(scores[i] == first[i] for i in range(len(PASSAGES)) if i not in band)


@pytest.mark.parametrize(
    ("chat_model", "judge_model", "judged"),
    [
        ("extractive", None, False),
        ("local", None, False),  # the small local model is not asked to judge by default
        ("extractive", "openai:judge", True),
        ("openai:test-model", "local", False),  # the judge named is the local model
    ],
)
def test_auto_asks_a_judge_only_on_a_server(
    fake: FakeOpenAI, tmp_path: Path, chat_model: str, judge_model: str | None, judged: bool
) -> None:
    ctx = Context(home=tmp_path, chat_model=chat_model, judge_model=judge_model)
    assert uses_llm(ctx) is judged
    if not judged:  # built without loading any chat model
        assert isinstance(make_grader(ctx, library=True), SimilarityGrader)
    assert without_llm(ctx).grading.grader == ("offline" if judged else "auto")


def test_no_llm_grades_offline_whatever_the_settings_say(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRAG_JUDGE_MODEL", "openai:judge")
    for grader in ([], ["--grader", "cascade"], ["--grader", "judge"], ["--grader", "mean"]):
        args = build_parser().parse_args(["ask", "What is dropout?", *grader, "--no-llm"])
        ctx = context_from_args(args)
        assert (
            ctx.models.chat_model == "extractive"
            and ctx.grading.grader == "offline"
            and not uses_llm(ctx)
        )
    args = build_parser().parse_args(
        ["ask", "What is dropout?", "--grader", "features", "--no-llm"]
    )
    assert context_from_args(args).grading.grader == "features"
