"""What every retrieval evaluator shares (the protocol, the cosine helpers) and the
graders built from others: similarity and the cascade.

CRAG's verdicts depend on the scores only, so every grader maps to the same scale
[0, 1] and the thresholds in `Context` keep their meaning whichever grader runs. All
the passages of one question are scored in one call (a batch, or concurrent
requests), never one after another.

Embedding similarity is fast, but rates "same topic" like "answers it": a long chunk
whose one sentence answers the question embeds as the average of all it says, so with
`strip_weight` a passage is also scored by its best strip (a few sentences), still
reading that passage alone. The cascade lets a cheap grader settle the clear cases and
the LLM judge the uncertain band.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from langchain_core.embeddings import Embeddings

from crag.text import strips_of

#: The score of a passage a grader could not judge: neither relevant nor not.
NEUTRAL = 0.5


class RelevanceGrader(Protocol):
    """Scores (question, passage) pairs; 1 = answers the question, 0 = does not."""

    name: str

    async def ascore(self, question: str, passages: Sequence[str]) -> list[float]: ...


class QuestionSimilarity:
    """Cosines of one question with any texts, the question embedded only once."""

    def __init__(self, embeddings: Embeddings, question: str) -> None:
        self.embeddings = embeddings
        self.question = _unit(np.asarray(embeddings.embed_query(question), dtype=np.float32))

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        return _unit(vectors_of(self.embeddings, texts)) @ self.question


def vectors_of(embeddings: Embeddings, texts: Sequence[str]) -> np.ndarray:
    """The texts' vectors as one float32 array (without a detour through lists where the
    embedder can give one)."""
    as_array = getattr(embeddings, "embed_array", None)
    if as_array is not None:
        return np.asarray(as_array(list(texts)), dtype=np.float32)
    return np.asarray(embeddings.embed_documents(list(texts)), dtype=np.float32)


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


def cosine_to_score(cos: np.ndarray, floor: float = 0.20, ceiling: float = 0.80) -> np.ndarray:
    """Stretch MiniLM cosines (which rarely leave 0.2-0.8) linearly onto [0, 1]."""
    return np.clip((cos - floor) / (ceiling - floor), 0.0, 1.0)


class SimilarityGrader:
    """Embedding similarity: fast, but rates 'same topic' like 'answers it'."""

    name = "similarity"

    def __init__(
        self, embeddings: Embeddings, strip_weight: float = 0.0, strip_sentences: int = 2
    ) -> None:
        self.embeddings = embeddings
        self.strip_weight = strip_weight
        self.strip_sentences = strip_sentences

    async def ascore(self, question: str, passages: Sequence[str]) -> list[float]:
        cos = await asyncio.to_thread(self._cosines, question, passages)
        return [float(s) for s in cosine_to_score(cos)]

    def _cosines(self, question: str, passages: Sequence[str]) -> np.ndarray:
        """Each passage's cosine, blended with its best strip's (one embedding call)."""
        if not self.strip_weight:
            return cosine_similarities(self.embeddings, question, passages)
        # a passage that is one strip (a strip refine scores) is its own best strip
        strips = [[s for s in strips_of(p, self.strip_sentences) if s != p] for p in passages]
        flat = [s for of_one in strips for s in of_one]
        cos = cosine_similarities(self.embeddings, question, [*passages, *flat])
        whole, rest = cos[: len(passages)], cos[len(passages) :]
        best = whole.copy()
        start = 0
        for i, of_one in enumerate(strips):
            if of_one:
                best[i] = max(best[i], rest[start : start + len(of_one)].max())
            start += len(of_one)
        return (1 - self.strip_weight) * whole + self.strip_weight * best


class CascadeGrader:
    """A cheap grader settles the clear cases; the LLM judge settles the uncertain band.

    The judge is the expensive part (about a second a pair on the local model), so it
    only sees passages whose first score lies in [low, high): filtered of orders to a
    model and delimited, as `JudgeGrader.messages` gives every passage it reads.
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
