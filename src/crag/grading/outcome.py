"""The run's `confidence`: the probability that crag's outcome is right.

Right means an answer whose context holds its evidence, or a decline of a question
nothing answers. A logistic model reads what crag already knows at the end of a run
(for an answer, the strips kept and the best web result's grade; for a decline, whether
terms of the question went unmet, whether it was for unmet constraints, the strips kept
and the best web result's grade: `SIGNALS`) and was fitted by library (`crag eval
--held-out` writes it; docs/evaluation.md has its calibration and the signals it
tried). The composite signals stay in the state as the explanation; this number is
what a reader may take as a probability.

`LogisticModel` is fitted by Newton steps (no sklearn), saved as JSON and checked when
read back; the lab fits others with it.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from importlib import resources
from typing import Any, Self, cast

import numpy as np


@dataclass
class LogisticModel:
    """score = sigmoid(w · features + b), fit by regularised Newton steps (no sklearn)."""

    weights: list[float]
    bias: float
    features: tuple[str, ...] = ()  # the names of what it reads, in order

    def predict(self, x: np.ndarray) -> np.ndarray:
        if x.size == 0:
            return np.zeros(0)
        z = x @ np.asarray(self.weights) + self.bias
        return 1.0 / (1.0 + np.exp(-z))

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 50) -> Self:
        xb = np.hstack([x, np.ones((len(x), 1))])
        w = np.zeros(xb.shape[1])
        reg = np.eye(xb.shape[1]) * l2
        reg[-1, -1] = 0.0  # the bias is not shrunk
        for _ in range(steps):
            p = 1.0 / (1.0 + np.exp(-(xb @ w)))
            grad = xb.T @ (p - y) + reg @ w
            hess = (xb * (p * (1 - p))[:, None]).T @ xb + reg
            step = np.linalg.solve(hess, grad)
            w -= step
            if float(np.abs(step).max()) < 1e-8:
                break
        return cls(weights=[float(v) for v in w[:-1]], bias=float(w[-1]))

    def to_dict(self) -> dict[str, Any]:
        return {"features": list(self.features), "weights": self.weights, "bias": self.bias}

    @classmethod
    def from_dict(
        cls, data: Any, features: tuple[str, ...] | None = None, refit: str = "crag train-grader"
    ) -> Self:
        """A saved model over `features` (in that order; the class's own by default);
        `refit`: the command that makes a new one when they differ."""
        if features is None:
            own = next(f.default for f in fields(cls) if f.name == "features")
            features = cast(tuple[str, ...], own)
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        if tuple(data.get("features", ())) != features:
            raise ValueError(
                f"model features {data.get('features')} are not this crag's {list(features)}: "
                f"retrain it with `{refit}`"
            )
        weights = [float(v) for v in data["weights"]]
        bias = float(data["bias"])
        if len(weights) != len(features) or not all(math.isfinite(v) for v in [*weights, bias]):
            raise ValueError("model weights or bias are missing or not finite")
        model = cls(weights=weights, bias=bias, features=features)
        # scores must be probabilities on any input the features can give
        probe = model.predict(np.array([[0.0] * len(features), [1.0] * len(features)]))
        if not np.all(np.isfinite(probe)) or probe.min() < 0.0 or probe.max() > 1.0:
            raise ValueError("model gives scores outside [0, 1]")
        return model


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
