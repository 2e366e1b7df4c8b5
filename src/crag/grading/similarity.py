"""Embedding similarity: fast, but rates "same topic" like "answers it"."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
from langchain_core.embeddings import Embeddings

from crag.grading.base import cosine_similarities


def cosine_to_score(cos: np.ndarray, floor: float = 0.20, ceiling: float = 0.80) -> np.ndarray:
    """Stretch MiniLM cosines (which rarely leave 0.2-0.8) linearly onto [0, 1]."""
    return np.clip((cos - floor) / (ceiling - floor), 0.0, 1.0)


class SimilarityGrader:
    """Embedding similarity: fast, but rates 'same topic' like 'answers it'."""

    name = "similarity"

    def __init__(self, embeddings: Embeddings) -> None:
        self.embeddings = embeddings

    async def ascore(self, question: str, passages: Sequence[str]) -> list[float]:
        cos = await asyncio.to_thread(cosine_similarities, self.embeddings, question, passages)
        return [float(s) for s in cosine_to_score(cos)]
