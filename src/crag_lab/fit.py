"""Fit crag's feature evaluator on labelled pairs, and measure it honestly.

Cross-validation splits folds by question, so no question is in both train and test:
a grader that memorised questions would look good otherwise and fail on new ones.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from crag_lab.dataset import Pair
from crag_lab.graders.features import FEATURES, FeatureGrader, FeatureModel
from crag_lab.metrics import best_accuracy, classify, roc_auc
from crag_lab.pairs import by_question


@dataclass
class Featurized:
    x: np.ndarray
    y: np.ndarray
    groups: list[str]
    seconds: float  # wall time of embedding + features, for pairs/s

    @property
    def pairs_per_second(self) -> float:
        return len(self.y) / self.seconds if self.seconds else float("inf")


def featurize(
    grader: FeatureGrader,
    pairs: Sequence[Pair],
    progress: Callable[[int, int], None] | None = None,
    library_questions: Collection[str] = (),
) -> Featurized:
    """Features of every pair, each question's passages taken together as in `grade`.

    The passages of the questions in `library_questions` (pairs generated from the
    user's library) are read as the library's chunks, the others as search results."""
    library = FeatureGrader(grader.embeddings, grader.model, library=True)
    groups = by_question(pairs)
    rows: list[np.ndarray] = []
    labels: list[bool] = []
    names: list[str] = []
    start = time.perf_counter()
    for i, (qid, items) in enumerate(groups.items(), start=1):
        reader = library if qid in library_questions else grader
        rows.append(reader.features(items[0]["question"], [p["passage"] for p in items]))
        labels += [p["relevant"] for p in items]
        names += [qid] * len(items)
        if progress:
            progress(i, len(groups))
    seconds = time.perf_counter() - start
    x = np.vstack(rows) if rows else np.zeros((0, len(FEATURES)))
    return Featurized(x, np.asarray(labels, dtype=float), names, seconds)


def group_folds(groups: Sequence[str], k: int, seed: int) -> list[np.ndarray]:
    """Test-index arrays of k folds with whole questions in each fold."""
    unique = sorted(set(groups))
    random.Random(seed).shuffle(unique)
    fold_of = {g: i % k for i, g in enumerate(unique)}
    where = np.array([fold_of[g] for g in groups])
    return [np.flatnonzero(where == i) for i in range(k)]


def cross_validate(data: Featurized, k: int = 5, seed: int = 0) -> dict[str, Any]:
    """Out-of-fold scores and metrics; the accuracy cut-off is chosen on training folds."""
    if len(set(data.groups)) < k:
        raise ValueError(f"cross-validation needs at least {k} questions")
    oof = np.zeros(len(data.y))
    correct = 0
    fold_auc = []
    for test in group_folds(data.groups, k, seed):
        train = np.setdiff1d(np.arange(len(data.y)), test)
        model = FeatureModel.fit(data.x[train], data.y[train])
        cut = best_accuracy(model.predict(data.x[train]).tolist(), data.y[train] > 0.5)
        oof[test] = model.predict(data.x[test])
        correct += int(((oof[test] >= cut["threshold"]) == data.y[test].astype(bool)).sum())
        auc = roc_auc(oof[test].tolist(), (data.y[test] > 0.5).tolist())
        if auc is not None:
            fold_auc.append(auc)
    labels = (data.y > 0.5).tolist()
    return {
        "folds": k,
        "auc": roc_auc(oof.tolist(), labels),
        "auc_fold_std": float(np.std(fold_auc)) if fold_auc else None,
        "accuracy": correct / len(labels),
        "at_0.5": classify(oof.tolist(), labels, 0.5),
        "scores": oof,
    }


def train(data: Featurized, drop: Collection[str] = ()) -> FeatureModel:
    """The logistic model on these pairs; features in `drop` are left out of the fit
    (weight 0), as if the grader had never had them (an ablation)."""
    unknown = set(drop) - set(FEATURES)
    if unknown:
        raise ValueError(f"unknown features {sorted(unknown)}; crag's are {', '.join(FEATURES)}")
    keep = [i for i, name in enumerate(FEATURES) if name not in drop]
    fitted = FeatureModel.fit(data.x[:, keep], data.y)
    weights = [0.0] * len(FEATURES)
    for i, w in zip(keep, fitted.weights, strict=True):
        weights[i] = w
    return FeatureModel(weights=weights, bias=fitted.bias)


def evaluate(model: FeatureModel, data: Featurized) -> dict[str, Any]:
    scores = model.predict(data.x).tolist()
    labels = (data.y > 0.5).tolist()
    return {
        "auc": roc_auc(scores, labels),
        "at_0.5": classify(scores, labels, 0.5),
        "best_accuracy": best_accuracy(scores, labels),
    }
