"""A hub cross-encoder or reranker as the grader: `grader=cross-encoder:<model>`.

For users with internet (or a model on disk): sentence-transformers' `CrossEncoder`
reads the question and each passage together and gives one probability per pair, for
library chunks, search results and refinement's strips alike. A model with one label
is read through its sigmoid; one with several through the softmax of its last label
(the "relevant" class of the usual rerankers). Its quality on crag's dev libraries is
not measured: the hub is not reachable where crag is measured.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
from collections.abc import Sequence
from typing import Any

from crag.errors import ProviderError


def check_installed() -> None:
    if importlib.util.find_spec("sentence_transformers") is None:
        raise ProviderError(
            "grader=cross-encoder needs sentence-transformers: pip install 'crag[hub]'"
        )


@functools.lru_cache(maxsize=2)
def _load(model: str) -> Any:
    """One loaded model per name and process: every grader of a run shares it."""
    check_installed()
    try:
        from sentence_transformers import CrossEncoder
    except ImportError as exc:  # installed, but a dependency of its own is missing or broken
        raise ProviderError(
            f"grader=cross-encoder cannot import sentence-transformers: {exc}"
        ) from None
    try:
        return CrossEncoder(model, device="cpu")  # pairs cut at the model's own length
    except Exception as exc:  # a missing, private or malformed model: one line, the cause
        msg = " ".join(str(exc).split())[:300]
        raise ProviderError(f"cannot load cross-encoder {model!r}: {msg}") from None


class CrossEncoderGrader:
    name = "cross-encoder"

    def __init__(self, model: Any) -> None:
        self.model = model
        self.labels = int(getattr(model, "num_labels", 1))

    def _score(self, question: str, passages: list[str]) -> list[float]:
        pairs = [(question, p) for p in passages]
        if self.labels == 1:
            return [float(p) for p in self.model.predict(pairs, show_progress_bar=False)]
        probs = self.model.predict(pairs, apply_softmax=True, show_progress_bar=False)
        return [float(row[-1]) for row in probs]

    async def ascore(self, question: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        return await asyncio.to_thread(self._score, question, list(passages))


def make_cross_encoder_grader(model: str) -> CrossEncoderGrader:
    if not model:
        raise ProviderError("grader=cross-encoder needs a model: cross-encoder:<hub name or path>")
    return CrossEncoderGrader(_load(model))
