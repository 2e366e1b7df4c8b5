"""Retrieval evaluators: score how well a passage answers a question, in [0, 1].

CRAG's verdicts depend on these scores only, so every grader maps to the same scale
and the thresholds in `Context` keep their meaning whichever grader runs. All the
passages of one question are scored in one call (a batch, or concurrent requests),
never one after another.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from crag import prompts
from crag.providers.errors import ProviderError

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel

    from crag.context import Context

log = logging.getLogger(__name__)

NEUTRAL = 0.5


class RelevanceGrader(Protocol):
    """Scores (question, passage) pairs; 1 = answers the question, 0 = does not."""

    name: str

    async def ascore(self, question: str, passages: Sequence[str]) -> list[float]: ...


def cosine_to_score(cos: np.ndarray, floor: float = 0.20, ceiling: float = 0.80) -> np.ndarray:
    """Stretch MiniLM cosines (which rarely leave 0.2-0.8) linearly onto [0, 1]."""
    return np.clip((cos - floor) / (ceiling - floor), 0.0, 1.0)


class QuestionSimilarity:
    """Cosines of one question with any texts, the question embedded only once."""

    def __init__(self, embeddings: Embeddings, question: str) -> None:
        self.embeddings = embeddings
        self.question = _unit(np.asarray(embeddings.embed_query(question), dtype=np.float32))

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        vectors = np.asarray(self.embeddings.embed_documents(list(texts)), dtype=np.float32)
        return _unit(vectors) @ self.question


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / norms.clip(min=1e-9)


def cosine_similarities(
    embeddings: Embeddings, question: str, passages: Sequence[str]
) -> np.ndarray:
    """Cosine of the question with each passage (one embedding call for the passages)."""
    if not passages:
        return np.zeros(0)
    return QuestionSimilarity(embeddings, question)(passages)


class SimilarityGrader:
    """Embedding similarity: fast, but rates 'same topic' like 'answers it'."""

    name = "similarity"

    def __init__(self, embeddings: Embeddings) -> None:
        self.embeddings = embeddings

    async def ascore(self, question: str, passages: Sequence[str]) -> list[float]:
        cos = await asyncio.to_thread(cosine_similarities, self.embeddings, question, passages)
        return [float(s) for s in cosine_to_score(cos)]


def yes_probability(message: BaseMessage) -> float | None:
    """P(yes) from the first generated token's top logprobs, or None if absent."""
    logprobs = (message.response_metadata or {}).get("logprobs") or {}
    content = logprobs.get("content") or []
    if not content:
        return None
    yes = no = 0.0
    candidates = content[0].get("top_logprobs") or [content[0]]
    for cand in candidates:
        token = str(cand.get("token", "")).strip().lower()
        p = math.exp(float(cand.get("logprob", -math.inf)))
        if token.startswith("yes"):
            yes += p
        elif token.startswith("no"):
            no += p
    if yes + no <= 0.0:
        return None
    return yes / (yes + no)


_SCORE_RE = re.compile(r'"?score"?\s*[:=]\s*(\d+(?:\.\d+)?)', re.IGNORECASE)


def parse_judgement(message: BaseMessage) -> float | None:
    """Read a judge reply: logprobs first, then a yes/no word, then a 0-10 score."""
    prob = yes_probability(message)
    if prob is not None:
        return prob
    text = message.content if isinstance(message.content, str) else str(message.content)
    word = text.strip().lower()
    if word.startswith("yes"):
        return 1.0
    if word.startswith("no"):
        return 0.0
    match = _SCORE_RE.search(text)
    if match:
        return min(max(float(match.group(1)) / 10.0, 0.0), 1.0)
    try:
        value = json.loads(text)
        if isinstance(value, dict) and "score" in value:
            return min(max(float(value["score"]) / 10.0, 0.0), 1.0)
    except (ValueError, TypeError):
        pass
    return None


class JudgeGrader:
    """An LLM judge on any chat model: P(yes) from logprobs where the model gives them."""

    name = "judge"

    def __init__(self, model: BaseChatModel, max_concurrency: int = 4) -> None:
        self.model = model.bind(logprobs=True, top_logprobs=5, max_tokens=1, temperature=0)
        self.max_concurrency = max_concurrency

    @staticmethod
    def messages(question: str, passage: str) -> list[BaseMessage]:
        return [
            SystemMessage(prompts.JUDGE_SYSTEM),
            HumanMessage(prompts.JUDGE_USER.format(question=question, passage=passage)),
        ]

    async def ascore(self, question: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        batch: list[Any] = [self.messages(question, p) for p in passages]
        replies = await self.model.abatch(
            batch, config={"max_concurrency": self.max_concurrency}, return_exceptions=True
        )
        scores: list[float] = []
        for reply in replies:
            score = parse_judgement(reply) if isinstance(reply, AIMessage) else None
            if score is None:
                log.warning("judge gave no usable answer (%r); scoring neutral", reply)
                score = NEUTRAL
            scores.append(score)
        return scores


class CascadeGrader:
    """A cheap grader settles the clear cases; the LLM judge settles the uncertain band.

    The judge is the expensive part (about a second a pair on the local model), so it
    only sees passages whose first score lies in [low, high).
    """

    name = "cascade"

    def __init__(
        self, first: RelevanceGrader, judge: RelevanceGrader, low: float, high: float
    ) -> None:
        self.first = first
        self.judge = judge
        self.low = low
        self.high = high

    async def ascore(self, question: str, passages: Sequence[str]) -> list[float]:
        scores = await self.first.ascore(question, passages)
        band = [i for i, s in enumerate(scores) if self.low <= s < self.high]
        if band:
            judged = await self.judge.ascore(question, [passages[i] for i in band])
            for i, score in zip(band, judged, strict=True):
                scores[i] = score
        return scores


def make_grader(ctx: Context, *, purpose: str = "documents") -> RelevanceGrader:
    """The grader named by `ctx.grader`.

    `auto` is crag's trained evaluator when `crag train-grader` saved one, else the
    built-in feature evaluator. Strips are always scored without the LLM judge: a
    question has dozens of them, and the judge costs about a second each.
    """
    from crag.providers.chat import make_chat_model
    from crag.providers.embeddings import make_embeddings
    from crag.providers.relevance_features import FeatureGrader
    from crag.providers.trained_grader import load_trained_grader

    choice = ctx.grader
    if choice not in GRADERS:
        raise ProviderError(f"unknown grader {choice!r}: use {', '.join(GRADERS)}")
    embeddings = make_embeddings(ctx.embeddings, threads=ctx.threads, timeout_s=ctx.timeout_s)
    if choice == "similarity":
        return SimilarityGrader(embeddings)
    features: RelevanceGrader = FeatureGrader(embeddings)
    if choice in ("auto", "trained", "cascade"):
        trained = load_trained_grader(ctx, embeddings, required=choice == "trained")
        features = trained or features
    if choice in ("auto", "features", "trained") or purpose == "strips":
        return features
    judge_spec = ctx.judge_model or ctx.chat_model
    if judge_spec == "extractive":
        raise ProviderError(f"grader={choice} needs a chat model (chat_model is 'extractive')")
    # The in-process llama.cpp engine runs one request at a time, and interleaved
    # requests lose its prompt-prefix cache: measured 2.7x slower than one by one.
    judge = JudgeGrader(
        make_chat_model(judge_spec, ctx), max_concurrency=1 if judge_spec == "local" else 4
    )
    if choice == "judge":
        return judge
    return CascadeGrader(features, judge, ctx.cascade_low, ctx.cascade_high)


GRADERS = ("auto", "features", "cascade", "similarity", "judge", "trained")
