"""The reader as a grader (`grader=reader`, the lab's): one calibrated probability per
(question, passage) pair, for library chunks, search results and refinement's strips.

Where cosine similarity rates a passage on the question's topic like one that states
the answer, the reader reads the two together (`reader_onnx`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from pathlib import Path

import crag
from crag.context import Context
from crag.errors import ProviderError
from crag_lab.graders.reader_onnx import ReaderModel

#: Where a reader crag shipped would lie (it ships none: `docs/evaluation.md`).
PACKAGED = Path(crag.__file__).resolve().parent / "data" / "reader.onnx"


@functools.lru_cache(maxsize=4)
def _model(path: Path, threads: int) -> ReaderModel:
    """One loaded model per file and process: every grader of a run shares it."""
    return ReaderModel(path, threads=threads)


def reader_path(ctx: Context) -> Path:
    return ctx.grading.reader_file or PACKAGED


class ReaderGrader:
    name = "reader"

    def __init__(self, model: ReaderModel) -> None:
        self.model = model

    async def ascore(self, question: str, passages: Sequence[str]) -> list[float]:
        probs = await asyncio.to_thread(self.model.probabilities, question, list(passages))
        return [float(p) for p in probs]


def make_reader_grader(ctx: Context) -> ReaderGrader:
    path = reader_path(ctx)
    if not path.is_file():
        raise ProviderError(
            f"no reader model at {path}: train one with `crag train-reader`, or set reader_file"
        )
    return ReaderGrader(_model(path, ctx.models.threads))
