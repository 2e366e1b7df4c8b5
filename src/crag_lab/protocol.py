"""The generalisation protocol: every fitted weight and threshold is judged on a
whole source it never saw.

Folds by question are not enough: questions of one source share its vocabulary,
formatting and question style, so a feature shaped on them looks good on their
neighbours and fails on a new library. Here each source (the books, the scikit-learn
guide, the news snippets) is held out in turn: weights and thresholds are fitted on
the others and measured on it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from crag.grading.verdict import decide
from crag.state import Grades
from crag_lab.dataset import Pair, Question
from crag_lab.graders.features import FeatureModel
from crag_lab.metrics import calibration, roc_auc
from crag_lab.tuning import grid, sweep

NONE = "none"
#: The source of questions the library (the `books` corpus of the questions file) answers.
LIBRARY = "books"


def question_source(question: Question) -> str:
    """Where a question's answer lives: `books` when the books hold its support, else the
    family of its external support files (the file name up to its first "_", e.g.
    `sklearn`, `rgb`), and `none` when nothing supports it. A `source` field in the
    questions file wins."""
    if question.get("source"):
        return str(question["source"])
    corpora = [s for s in question["support"] if s["doc"]]
    if any(s["corpus"] == LIBRARY for s in corpora):
        return LIBRARY
    if corpora:
        return corpora[0]["doc"].split("_", 1)[0]
    return NONE


def pair_sources(pairs: Sequence[Pair], questions: Sequence[Question]) -> list[str]:
    """Each pair's source: its question's (pairs whose question is unknown: `?`)."""
    by_id = {q["id"]: question_source(q) for q in questions}
    by_text = {q["question"]: question_source(q) for q in questions}
    return [by_id.get(p["qid"]) or by_text.get(p["question"], "?") for p in pairs]


def searched_in_library(source: str) -> bool:
    """Whether crag looks for a question of this source in its library (else on the web)."""
    return source in (LIBRARY, NONE, "?")


def auc_by_source(
    scores: Sequence[float], labels: Sequence[bool], sources: Sequence[str]
) -> dict[str, float | None]:
    return {
        source: roc_auc(
            [x for x, s in zip(scores, sources, strict=True) if s == source],
            [y for y, s in zip(labels, sources, strict=True) if s == source],
        )
        for source in sorted(set(sources))
    }


def _auc(scores: np.ndarray, y: np.ndarray) -> float | None:
    return roc_auc(scores.tolist(), (y > 0.5).tolist())


def loso_auc(
    x: np.ndarray, y: np.ndarray, sources: Sequence[str], columns: Mapping[str, int]
) -> dict[str, Any]:
    """Pair ROC AUC on each held-out source: the logistic model fitted on the other
    sources, against single columns (e.g. similarity) that need no fitting; and how
    well the held-out scores read as probabilities (`calibration`)."""
    src = np.asarray(sources)
    held = np.zeros(len(y))
    rows: dict[str, dict[str, Any]] = {}
    for source in sorted(set(sources)):
        test = src == source
        if test.all() or len(set(y[test])) < 2:
            continue
        model = FeatureModel.fit(x[~test], y[~test])
        held[test] = model.predict(x[test])
        rows[source] = {
            "n": int(test.sum()),
            "fitted": _auc(held[test], y[test]),
            **calibration(held[test].tolist(), (y[test] > 0.5).tolist()),
            **{name: _auc(x[test, col], y[test]) for name, col in columns.items()},
        }
    covered = np.isin(src, list(rows))
    overall = {
        "n": int(covered.sum()),
        "fitted": _auc(held[covered], y[covered]),
        **calibration(held[covered].tolist(), (y[covered] > 0.5).tolist()),
        **{name: _auc(x[covered, col], y[covered]) for name, col in columns.items()},
    }
    return {"by_source": rows, "overall": overall}


def _fit_and_score(
    grades: Sequence[Grades],
    expected: Sequence[str],
    train: Sequence[int],
    test: Sequence[int],
    axis: Sequence[float],
    gap: float | None,
) -> tuple[int, dict[str, float]]:
    """(lower, upper) fitted on `train`; the number of `test` questions then right."""
    surface = sweep([grades[i] for i in train], [expected[i] for i in train], axis, axis, gap)
    best = surface.best()
    right = sum(
        decide(grades[i], best["upper"], best["lower"], gap).verdict == expected[i] for i in test
    )
    return right, best


def fold_thresholds(
    grades: Sequence[Grades],
    expected: Sequence[str],
    gap: float | None,
    k: int = 5,
    seed: int = 0,
    step: float = 0.05,
) -> float | None:
    """Verdict accuracy with (lower, upper) fitted on the other k-1 folds of questions."""
    if len(expected) < k:
        return None
    order = list(range(len(expected)))
    random.Random(seed).shuffle(order)
    folds = [order[i::k] for i in range(k)]
    hits = 0
    for test in folds:
        held = set(test)
        train = [i for i in order if i not in held]
        right, _ = _fit_and_score(grades, expected, train, test, grid(step), gap)
        hits += right
    return hits / len(expected)


def loso_thresholds(
    grades: Sequence[Grades],
    expected: Sequence[str],
    sources: Sequence[str],
    gap: float | None,
    step: float = 0.05,
) -> dict[str, Any]:
    """Verdict accuracy on each held-out source, with (lower, upper) fitted on the rest.

    Questions nothing supports (`none`) have no source of their own; they are held
    out as a group too, so their thresholds also come from the answerable sources.
    Where every question of a source expects one verdict that no other source expects
    (a library's own questions are the only `correct` ones), the fit has nothing to
    learn that verdict from: `fold_thresholds` (folds of questions) is the fallback.
    """
    axis = grid(step)
    rows: dict[str, dict[str, Any]] = {}
    hits = 0
    for source in sorted(set(sources)):
        train = [i for i, s in enumerate(sources) if s != source]
        test = [i for i, s in enumerate(sources) if s == source]
        right, best = _fit_and_score(grades, expected, train, test, axis, gap)
        hits += right
        rows[source] = {
            "n": len(test),
            "accuracy": right / len(test),
            "lower": best["lower"],
            "upper": best["upper"],
        }
    return {"by_source": rows, "overall": hits / len(sources) if sources else None}
