"""Embedding similarity: fast, but rates "same topic" like "answers it".

A long chunk whose one sentence answers the question embeds as the average of all it
says; with `strip_weight` a passage is also scored by its best strip (a few sentences),
still reading that passage alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
from langchain_core.embeddings import Embeddings

from crag.grading.base import cosine_similarities
from crag.text import strips_of


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
