"""Similarity scores a passage by itself, and with `strip_weight` also by its best strip."""

from __future__ import annotations

import asyncio

import pytest
from fakes import FakeEmbeddings

from crag.grading.graders import SimilarityGrader

QUESTION = "which tcp port does the server listen on by default"
ANSWERING = (
    "The guide covers packages and upgrades. Backups run nightly at two. "
    "Logs rotate weekly on every host. By default the server will listen on tcp port 7420. "
    "Themes change the colours of the client. Exports are written as zip archives."
)
OTHER = "Rate limits apply per token. Each bucket refills every minute."


def _scores(weight: float, passages: list[str]) -> list[float]:
    grader = SimilarityGrader(FakeEmbeddings(dim=512), strip_weight=weight)
    return asyncio.run(grader.ascore(QUESTION, passages))


def test_a_long_passage_that_answers_in_one_strip_scores_higher_with_its_strips() -> None:
    whole, half, best = (_scores(w, [ANSWERING])[0] for w in (0.0, 0.5, 1.0))
    assert whole < half < best
    assert half == pytest.approx((whole + best) / 2, abs=1e-6)


def test_a_passage_is_scored_alone_whatever_else_is_in_the_batch() -> None:
    for weight in (0.0, 1.0):
        alone = _scores(weight, [ANSWERING])
        together = _scores(weight, [OTHER, ANSWERING, OTHER])
        assert together[1] == alone[0]
        assert together[0] == together[2] < together[1]
