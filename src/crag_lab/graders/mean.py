"""The offline grader's score and the LLM judge's, averaged on every passage
(`grader=mean`, the lab's)."""

from __future__ import annotations

from collections.abc import Sequence

from crag.grading.graders import RelevanceGrader


class MeanGrader:
    """The offline grader's score and the LLM judge's P(yes), averaged on every passage.

    Each reads what the other misses: the judge whether a passage states the answer, not
    only its topic; cosine how close a passage of the library's own vocabulary is. It
    costs a judge call for every passage (docs/evaluation.md has both measured).
    """

    name = "mean"

    def __init__(self, first: RelevanceGrader, judge: RelevanceGrader, weight: float) -> None:
        self.first = first
        self.judge = judge
        self.weight = weight

    async def ascore(self, question: str, passages: Sequence[str]) -> list[float]:
        first = await self.first.ascore(question, passages)
        judged = await self.judge.ascore(question, passages)
        w = self.weight
        return [(1 - w) * a + w * b for a, b in zip(first, judged, strict=True)]
