"""A logistic model: a probability from a few signals, fitted by Newton steps (no
sklearn), saved as JSON and checked when read back. crag's confidence
(`crag.grading.outcome`) is one; the lab fits others."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
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
