"""The run's confidence fitted and measured held out by library (`crag.grading.outcome`).

Each library's records are scored by a model fitted on the other libraries' records
only; the model that ships is fitted on all of them. A record is right as
`metrics.right_decision` judges it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from crag.grading.outcome import MODEL_FILE, SIGNALS, LogisticModel, signals
from crag_lab import plots
from crag_lab.dataset import Question
from crag_lab.metrics import calibration, ece_floor, reliability, right_decision
from crag_lab.report import RELIABILITY_PNG

#: Regularisation of the fit: a few hundred records, eight signals.
L2 = 0.3

Outcomes = tuple[np.ndarray, np.ndarray]


def outcomes(questions: Sequence[Question], records: Sequence[Mapping[str, Any]]) -> Outcomes:
    """Each run record's signals, and whether its outcome was right (errors left out)."""
    rows, labels = [], []
    for q, r in zip(questions, records, strict=True):
        if r.get("error"):
            continue
        rows.append(
            signals(
                answered=bool(r.get("answered")),
                kept_strips=int(r.get("kept_strips") or 0),
                web_scores=[d.get("score", 0.0) for d in r.get("web_documents") or []],
                unmet_terms=bool(r.get("missing_terms") or r.get("unsupported")),
                decline_reason=r.get("decline_reason"),
            )
        )
        labels.append(right_decision(q, r))
    x = np.asarray(rows, dtype=float).reshape(-1, len(SIGNALS))
    return x, np.asarray(labels, dtype=float)


def fit(sets: Sequence[Outcomes]) -> LogisticModel:
    """One model over every record of these sets."""
    x = np.vstack([s[0] for s in sets])
    y = np.concatenate([s[1] for s in sets])
    if len(set(y.tolist())) < 2:  # one kind of outcome: its smoothed rate, whatever the signals
        rate = (y.sum() + 1) / (len(y) + 2)
        return LogisticModel([0.0] * len(SIGNALS), float(np.log(rate / (1 - rate))), SIGNALS)
    model = LogisticModel.fit(x, y, l2=L2)
    return LogisticModel(model.weights, model.bias, features=SIGNALS)


def refit_spread(
    others: Sequence[Outcomes], x: np.ndarray, y: np.ndarray, bins: int, draws: int = 200
) -> dict[str, float]:
    """The expected calibration error on (x, y) of models fitted on bootstrap resamples of
    the others' runs (10th, 50th and 90th percentile, seeded): how far the fit set alone
    moves the measured error, beside the test set's own noise (`ece_floor`)."""
    xo = np.vstack([s[0] for s in others])
    yo = np.concatenate([s[1] for s in others])
    rng = np.random.default_rng(0)
    eces = []
    for _ in range(draws):
        pick = rng.integers(0, len(yo), len(yo))
        p = fit([(xo[pick], yo[pick])]).predict(x)
        eces.append(calibration(p.tolist(), (y > 0.5).tolist(), bins)["ece"])
    p10, median, p90 = np.percentile(eces, [10, 50, 90])
    return {"p10": float(p10), "median": float(median), "p90": float(p90)}


def held_out(by_library: Mapping[str, Outcomes], bins: int = 10) -> dict[str, dict[str, Any]]:
    """Per library, the confidence a model fitted on the others gives its records: the
    expected calibration error (and what a perfectly calibrated model would show on as
    many outcomes, and what refits on resampled runs of the others give), the Brier
    score, the reliability bins, and the mean confidence of right and of wrong outcomes."""
    out: dict[str, dict[str, Any]] = {}
    for name, (x, y) in by_library.items():
        others = [s for other, s in by_library.items() if other != name]
        if not others or not len(y):
            continue
        p = fit(others).predict(x)
        right = y > 0.5
        out[name] = {
            "n": len(y),
            "right": float(right.mean()),
            **calibration(p.tolist(), right.tolist(), bins),
            "ece_floor": ece_floor(p.tolist(), bins),
            "ece_refit": refit_spread(others, x, y, bins),
            "mean_right": float(p[right].mean()) if right.any() else None,
            "mean_wrong": float(p[~right].mean()) if (~right).any() else None,
            "bins": reliability(p.tolist(), right.tolist(), bins),
        }
    return out


def measure(
    runs: Mapping[str, tuple[Sequence[Question], Sequence[Mapping[str, Any]]]], out: Path
) -> dict[str, dict[str, Any]]:
    """crag's runs on each library (questions, records): the confidence held out by
    library, its reliability diagram (out/reliability.png), and the model fitted on every
    library (out/confidence.json, the file `crag.grading.outcome` ships)."""
    sets = {name: outcomes(questions, records) for name, (questions, records) in runs.items()}
    held = held_out(sets)
    out.mkdir(parents=True, exist_ok=True)
    if held:
        plots.reliability_diagram(held, out / RELIABILITY_PNG)
    model = fit(list(sets.values()))
    (out / MODEL_FILE).write_text(json.dumps(model.to_dict(), indent=2) + "\n")
    return held
