"""The reader's pairs: labels by construction, on-topic negatives, nested curve sizes,
and the on-topic AUC they are measured with."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from crag_lab.construct import Candidate, build_row
from crag_lab.metrics import grouped_auc
from crag_lab.reader_data import first_questions, pairs_of, training_pairs

CHUNK = (
    "The listen directive sets the address and port of a server. "
    "By default nginx listens on port 80 for plain HTTP traffic. "
    "The ssl parameter makes every connection on the port use TLS. "
    "Several listen directives may share one server block. "
    "Each server block may also name its hosts."
)
OTHERS = ["The worker_processes directive sets how many workers serve requests."] * 2


def row() -> dict:
    built = build_row(
        Candidate("nginx", "doc.txt", "nginx:doc.txt#3", CHUNK, OTHERS),
        "Which port does nginx listen on by default for HTTP?",
        "port 80",
    )
    assert isinstance(built, dict)
    return built


def test_only_texts_holding_the_answer_are_positive() -> None:
    pairs = pairs_of(row(), random.Random(0))
    positives = [p for p in pairs if p.label]
    negatives = [p for p in pairs if not p.label]
    assert positives and negatives
    assert all("port 80" in p.text for p in positives)
    assert all("port 80" not in p.text for p in negatives)
    # the deletion negative and strips of the chunk are on the question's topic
    assert any(p.kind == "passage" and "listen directive" in p.text for p in negatives)
    assert any(p.kind == "strip" for p in negatives)
    assert {p.kind for p in positives} == {"passage", "strip"}
    assert len({p.group for p in pairs}) == 1


def test_one_other_chunk_and_at_most_three_negative_strips() -> None:
    pairs = pairs_of(row(), random.Random(0))
    other = [p for p in pairs if p.kind == "passage" and p.text == OTHERS[0]]
    assert len(other) == 1
    assert 1 <= sum(p.kind == "strip" and not p.label for p in pairs) <= 3


def test_a_bigger_training_set_holds_every_smaller_one() -> None:
    rows = [{**row(), "chunk_id": f"c{i}"} for i in range(30)]
    small, big = first_questions(rows, 10, seed=3), first_questions(rows, 20, seed=3)
    assert big[:10] == small
    assert training_pairs(small, seed=1) == training_pairs(small, seed=1)


def test_on_topic_auc_compares_within_a_question_only() -> None:
    # each question's answer outscores its own negatives, not the other question's
    scores = [0.9, 0.8, 0.4, 0.3]
    labels = [True, False, True, False]
    groups = ["a", "a", "b", "b"]
    assert grouped_auc(scores, labels, groups) == 1.0
    assert grouped_auc([0.5, 0.5], [True, False], ["a", "a"]) == 0.5
    assert grouped_auc([0.2, 0.9], [True, False], ["a", "a"]) == 0.0
    assert grouped_auc([0.2, 0.9], [True, True], ["a", "b"]) is None


@pytest.mark.parametrize("scale,shift", [(1.0, 0.0), (2.5, -1.0), (0.4, 0.7)])
def test_platt_recovers_the_curve_that_drew_the_labels(scale: float, shift: float) -> None:
    import numpy as np

    from crag_lab.graders.reader_onnx import platt

    rng = np.random.default_rng(0)
    x = rng.normal(0, 2, 20000)
    y = rng.random(20000) < 1 / (1 + np.exp(-(scale * x + shift)))
    a, b = platt(x.tolist(), y.tolist())
    assert a == pytest.approx(scale, abs=0.1) and b == pytest.approx(shift, abs=0.1)


def test_no_chunk_of_an_unseen_question_is_trained_on() -> None:
    from crag_lab.reader_data import split_unseen

    rows = [{**row(), "chunk_id": f"c{i // 3}", "question": f"q{i}"} for i in range(30)]
    unseen, pool = split_unseen(rows, 5, seed=2)
    assert len(unseen) == 5 and pool
    assert not {r["chunk_id"] for r in unseen} & {r["chunk_id"] for r in pool}
    assert len(pool) + len(unseen) < len(rows)  # the unseen chunks' other questions left out


def test_dev_pairs_without_a_question_id_are_grouped_by_question(tmp_path: Path) -> None:
    from crag_lab.reader_data import dev_pairs

    path = tmp_path / "pairs.jsonl"
    rows = [
        {"question": "q1", "passage": "p", "relevant": True},
        {"question": "q1", "passage": "x", "relevant": False},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [(p.group, p.label) for p in dev_pairs(path)] == [("q1", True), ("q1", False)]
