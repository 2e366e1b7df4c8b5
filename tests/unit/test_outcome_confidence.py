"""The run's confidence: its signals, the shipped model, and the held-out fit of the lab."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crag.grading.outcome import SIGNALS, LogisticModel, probability, shipped, signals
from crag_lab import confidence
from crag_lab.dataset import Question
from crag_lab.metrics import calibration, reliability


def test_an_answer_and_a_decline_read_the_evidence_with_their_own_weights() -> None:
    common: dict[str, Any] = {"kept_strips": 14, "web_scores": [0.3, 0.8]}
    said = dict(
        zip(
            SIGNALS,
            signals(answered=True, unmet_terms=True, decline_reason=None, **common),
            strict=True,
        )
    )
    assert said["answered"] == 1.0 and said["answered_kept_strips"] == 1.0  # of ten
    assert said["answered_best_web_score"] == 0.8
    assert said["declined_unmet_terms"] == 0.0 and said["declined_kept_strips"] == 0.0
    no = dict(
        zip(
            SIGNALS,
            signals(
                answered=False,
                unmet_terms=True,
                decline_reason="constraints unmet",
                **{**common, "kept_strips": 3},
            ),
            strict=True,
        )
    )
    assert no["answered"] == no["answered_kept_strips"] == no["answered_best_web_score"] == 0.0
    assert no["declined_unmet_terms"] == no["declined_constraints"] == 1.0
    assert no["declined_kept_strips"] == pytest.approx(0.3)
    assert no["declined_best_web_score"] == 0.8
    nothing = signals(
        answered=False,
        kept_strips=0,
        web_scores=[],
        unmet_terms=False,
        decline_reason="no evidence",
    )
    assert nothing == [0.0] * len(SIGNALS)


def test_the_shipped_model_gives_probabilities_over_its_signals() -> None:
    model = shipped()
    assert model.features == SIGNALS
    corners = [
        signals(
            answered=a,
            kept_strips=k,
            web_scores=w,
            unmet_terms=u,
            decline_reason=r,
        )
        for a in (True, False)
        for k in (0, 10)
        for w in ([], [1.0])
        for u in (True, False)
        for r in (None, "constraints unmet")
    ]
    p = [probability(x) for x in corners]
    assert all(0.0 < v < 1.0 for v in p) and len(set(p)) > 10
    even = LogisticModel([0.0] * len(SIGNALS), 0.0, features=SIGNALS)
    assert probability(corners[0], even) == 0.5
    with pytest.raises(ValueError, match="crag eval --held-out"):
        LogisticModel.from_dict(
            {**model.to_dict(), "features": ["answered"]}, SIGNALS, refit="crag eval --held-out"
        )


def test_reliability_bins_hold_every_score_and_give_the_calibration_error() -> None:
    scores = [0.05, 0.15, 0.15, 0.95, 0.9, 0.55]
    labels = [False, False, True, True, True, False]
    bins = reliability(scores, labels)
    assert sum(b["n"] for b in bins) == len(scores)
    assert [b["low"] for b in bins] == [0.0, 0.1, 0.5, 0.9]
    assert bins[1] == {"low": 0.1, "high": 0.2, "n": 2, "predicted": 0.15, "observed": 0.5}
    gap = sum(abs(b["predicted"] - b["observed"]) * b["n"] for b in bins) / len(scores)
    assert calibration(scores, labels)["ece"] == pytest.approx(gap)


def library(seed: int, n: int = 160) -> tuple[list[Question], list[dict[str, Any]]]:
    """Runs whose outcome follows their top grade: an answer from a high grade holds the
    evidence, a decline after a low one is of a question nothing answers."""
    rng = random.Random(seed)
    questions: list[Question] = []
    records: list[dict[str, Any]] = []
    for i in range(n):
        top = rng.random()
        answered = rng.random() < 0.6
        right = rng.random() < (top if answered else 1 - top)
        answerable = answered == right
        questions.append(
            {
                "id": f"q{i}",
                "question": f"q{i}?",
                "category": "internal" if answerable else "none",  # type: ignore[typeddict-item]
                "expected_verdict": "correct" if answerable else "incorrect",
                "answers": ["evidence"],
                "reference_answer": "",
                "support": [],
            }
        )
        text = "the evidence" if right and answered else "something else"
        records.append(
            {
                "answered": answered,
                "kept_strips": round(10 * top),
                "decline_reason": None if answered else "no evidence",
                "web_documents": [{"score": top}],
                "composite": top if answered else 0.0,
                "context": [{"source": "book.pdf", "text": text}] if answered else [],
                "error": None,
            }
        )
    return questions, records


def test_held_out_confidence_separates_right_from_wrong_and_ships_a_model(tmp_path: Path) -> None:
    runs = {"a": library(1), "b": library(2)}
    held = confidence.measure(runs, tmp_path)
    assert set(held) == {"a", "b"}
    for h in held.values():
        assert h["n"] == 160 and 0.0 < h["right"] < 1.0
        assert h["mean_right"] - h["mean_wrong"] > 0.15  # the grade carries the outcome
        assert h["ece"] < 0.15 and sum(b["n"] for b in h["bins"]) == 160
    assert (tmp_path / "reliability.png").stat().st_size > 1000
    saved = LogisticModel.from_dict(json.loads((tmp_path / "confidence.json").read_text()), SIGNALS)
    assert saved.weights[SIGNALS.index("answered_kept_strips")] > 0
    assert saved.weights[SIGNALS.index("declined_kept_strips")] < 0
    # held out means fitted without the library measured: its own labels flipped change
    # nothing of its scores
    x, y = confidence.outcomes(*runs["a"])
    flipped = {"a": (x, 1 - y), "b": confidence.outcomes(*runs["b"])}
    again = confidence.held_out(flipped)
    assert again["a"]["mean_right"] != held["a"]["mean_right"]  # the labels are its own
    assert np.isclose(
        again["a"]["bins"][0]["predicted"], held["a"]["bins"][0]["predicted"]
    )  # the scores are not


def test_the_error_of_refits_spreads_less_the_more_runs_they_are_fitted_on() -> None:
    """How far the fit set alone moves the held-out error: bootstrap refits of the other
    library's runs, seeded, narrower when there are more of them to fit on."""
    x, y = confidence.outcomes(*library(3))
    few = confidence.refit_spread([confidence.outcomes(*library(4, n=40))], x, y, 10)
    many = confidence.refit_spread([confidence.outcomes(*library(4, n=1600))], x, y, 10)
    assert few["p10"] <= few["median"] <= few["p90"]
    assert many["p90"] - many["p10"] < few["p90"] - few["p10"]
    assert confidence.refit_spread([confidence.outcomes(*library(4, n=40))], x, y, 10) == few
    held = confidence.held_out({"a": (x, y), "b": confidence.outcomes(*library(4))})
    other = confidence.outcomes(*library(4))
    assert held["a"]["ece_refit"] == confidence.refit_spread([other], x, y, 10)  # the others


def test_runs_that_were_all_right_give_their_smoothed_rate() -> None:
    x = np.ones((4, len(SIGNALS)))
    model = confidence.fit([(x, np.ones(4))])
    assert probability(list(x[0]), model) == pytest.approx(5 / 6, abs=1e-4)
