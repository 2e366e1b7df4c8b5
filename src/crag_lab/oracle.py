"""The perfect reader: crag's graph with a grader that knows each question's labels.

A passage or strip scores 1 when it holds one of the question's answers or the phrase
its support names as evidence (`metrics.support_hit`), else 0; an unanswerable
question's passages all score 0. Run as the `oracle` system (`crag eval --systems
crag,oracle`), it gives the decision quality crag would reach if its scorer read
perfectly, so what it still loses is retrieval's (the evidence never among the
candidates), refinement's, verification's or generation's, and what crag loses beyond
it is the scorer's. Lab only: the grader is registered when the lab is imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING

from crag.context import Context
from crag.grading.registry import GRADERS
from crag_lab.dataset import ANSWERABLE, Question
from crag_lab.metrics import support_hit

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

#: The labelled question being run (`runner.run_questions` sets it for every system).
CURRENT: ContextVar[Question | None] = ContextVar("crag_lab_current_question", default=None)


class OracleGrader:
    name = "oracle"

    async def ascore(self, question: str, passages: Sequence[str]) -> list[float]:
        labelled = CURRENT.get()
        if labelled is None or labelled["category"] not in ANSWERABLE:
            return [0.0] * len(passages)
        return [float(support_hit(labelled, [{"text": p}])) for p in passages]


@GRADERS.register("oracle", "lab only: the question's labels (crag_lab.oracle)")
def _oracle(ctx: Context, embeddings: Embeddings, library: bool) -> OracleGrader:
    return OracleGrader()
