"""The offline grader and the LLM judge together: the judge for the uncertain band only."""

from __future__ import annotations

from collections.abc import Sequence

from crag.grading.base import RelevanceGrader


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
