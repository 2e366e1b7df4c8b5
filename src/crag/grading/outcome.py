"""The run's `confidence`: the probability that crag's outcome is right.

Right means an answer whose context holds its evidence, or a decline of a question
nothing answers. A logistic model reads what crag already knows at the end of a run
(the verdict, the grades, how the answer was supported, why it declined, the composite
confidence of its sources) and was fitted held out by library (`crag eval --held-out`
writes it; docs/evaluation.md has its calibration). The composite signals stay in the
state as the explanation; this number is what a reader may take as a probability.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from importlib import resources

import numpy as np

from crag.grading.logistic import LogisticModel

#: What the model reads, in order: an answer's signals, then a decline's. The grades
#: and the composite are left out: how high a library's passages score differs from
#: library to library more than between right and wrong outcomes, and a source's age
#: says nothing about whether a default port is right (docs/evaluation.md).
SIGNALS = (
    "answered",
    "answered_kept_strips",
    "answered_best_web_score",
    "declined_unmet_terms",
    "declined_constraints",
    "declined_kept_strips",
    "declined_best_web_score",
)
MODEL_FILE = "confidence.json"


def signals(
    *,
    answered: bool,
    kept_strips: int,
    web_scores: Sequence[float],
    unmet_terms: bool,
    decline_reason: str | None,
) -> list[float]:
    """The model's inputs, in `SIGNALS` order: the strips kept (of ten), the best web
    result's grade, whether some of the question's terms went unmet, and whether a
    decline was for unmet constraints. An answer and a decline read the same evidence
    differently, so each has its own weights."""
    kept = min(kept_strips, 10) / 10
    web = max(web_scores, default=0.0)
    if answered:
        return [1.0, kept, web, 0.0, 0.0, 0.0, 0.0]
    constraints = float(decline_reason == "constraints unmet")
    return [0.0, 0.0, 0.0, float(unmet_terms), constraints, kept, web]


@functools.cache
def shipped() -> LogisticModel:
    """The model that ships with crag (package data)."""
    text = resources.files("crag").joinpath("data", MODEL_FILE).read_text(encoding="utf-8")
    return LogisticModel.from_dict(json.loads(text), SIGNALS, refit="crag eval --held-out")


def probability(values: Sequence[float], model: LogisticModel | None = None) -> float:
    """The probability that the outcome these signals describe is right."""
    p = (model or shipped()).predict(np.asarray([values], dtype=float))
    return round(float(p[0]), 4)
