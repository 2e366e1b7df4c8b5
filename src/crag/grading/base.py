"""What every retrieval evaluator shares: the protocol, and cosine helpers.

CRAG's verdicts depend on the scores only, so every grader maps to the same scale
[0, 1] and the thresholds in `Context` keep their meaning whichever grader runs.
All the passages of one question are scored in one call (a batch, or concurrent
requests), never one after another.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from langchain_core.embeddings import Embeddings

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
