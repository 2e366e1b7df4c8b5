"""The lab's library protocol: decision quality, declines by reason, library folders,
fitting without features, and the side-by-side tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crag_lab import fit
from crag_lab.dataset import Question
from crag_lab.graders.features import FEATURES
from crag_lab.heldout import held_out_splits
from crag_lab.libraries import parse, parse_all
from crag_lab.metrics import declines_by_reason, system_metrics
from crag_lab.report import ablation_table, libraries_table


def question(qid: str, category: str, hint: str = "the answer is 42") -> Question:
    verdict = {"internal": "correct", "partial": "ambiguous"}.get(category, "incorrect")
    return {
        "id": qid,
        "question": f"question {qid}?",
        "category": category,  # type: ignore[typeddict-item]
        "expected_verdict": verdict,
        "answers": [],
        "reference_answer": "",
        "support": []
        if category == "none"
        else [{"corpus": "books", "doc": "a.pdf", "hint": hint}],
    }


def record(answered: bool, context: str = "", reason: str | None = None) -> dict[str, Any]:
    return {
        "verdict": "correct",
        "answered": answered,
        "decline_reason": None if answered else reason,
        "context": [{"source": "a.pdf", "origin": "library", "page": "1", "text": context}]
        if context
        else [],
        "context_tokens": len(context.split()),
        "retrieved_tokens": 10,
        "seconds": 0.1,
        "path": [],
        "error": None,
    }


def test_decision_quality_is_the_mean_of_the_categories_not_of_the_questions() -> None:
    qs = [
        question("i1", "internal"),
        question("i2", "internal"),
        question("i3", "internal"),
        question("n1", "none"),
    ]
    records = [
        record(True, "so the answer is 42 here"),  # right: evidence in context
        record(True, "something else"),  # answered without evidence: wrong
        record(False, reason="no evidence"),  # declined an answerable one: wrong
        record(False, reason="no evidence"),  # declined the unanswerable one: right
    ]
    m = system_metrics(qs, records)
    assert m["by_category"]["internal"]["decision_quality"] == pytest.approx(1 / 3)
    assert m["by_category"]["none"]["decision_quality"] == 1.0
    assert m["by_category"]["external"]["decision_quality"] is None  # no such questions
    # (1/3 + 1) / 2, not 2/4: each category weighs the same
    assert m["decision_quality"] == pytest.approx(2 / 3)


def test_declines_by_reason_give_each_reasons_precision() -> None:
    qs = [question("i1", "internal"), question("n1", "none"), question("n2", "none")]
    records = [
        record(False, reason="constraints unmet"),
        record(False, reason="constraints unmet"),
        record(False, reason="no evidence"),
    ]
    got = declines_by_reason(qs, records)
    assert got["constraints unmet"] == {"n": 2, "answerable": 1, "precision": 0.5}
    assert got["no evidence"] == {"n": 1, "answerable": 0, "precision": 1.0}
    assert list(got) == ["constraints unmet", "no evidence"]  # most declines first


def test_a_library_folder_is_named_and_homed_and_bad_folders_say_why(tmp_path: Path) -> None:
    folder = tmp_path / "lib"
    folder.mkdir()
    with pytest.raises(ValueError, match=r"is a folder without questions\.jsonl"):
        parse(str(folder), tmp_path / "homes")
    (folder / "questions.jsonl").write_text("{}\n")
    (folder / "books").mkdir()
    lib = parse(f"mine={folder}", tmp_path / "homes")
    assert (lib.name, lib.home, lib.books, lib.pairs) == (
        "mine",
        tmp_path / "homes" / "mine",
        folder / "books",
        None,
    )
    assert parse(str(folder), tmp_path / "homes").name == "lib"
    with pytest.raises(ValueError, match="share a name"):
        parse_all([str(folder), f"lib={folder}"], tmp_path / "homes")
    with pytest.raises(ValueError, match="missing: no such file or folder"):
        parse(str(tmp_path / "missing"), tmp_path / "homes")
    (tmp_path / "file.jsonl").write_text("{}\n")
    with pytest.raises(ValueError, match="not a folder"):
        parse(str(tmp_path / "file.jsonl"), tmp_path / "homes")


def test_each_library_is_held_out_once_and_fitted_on_all_the_others(tmp_path: Path) -> None:
    libs = []
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "questions.jsonl").write_text("{}\n")
        libs.append(parse(str(tmp_path / name), tmp_path / "homes"))
    splits = held_out_splits(libs)
    assert [(t.name, [x.name for x in train]) for t, train in splits] == [
        ("a", ["b", "c"]),
        ("b", ["a", "c"]),
        ("c", ["a", "b"]),
    ]
    with pytest.raises(ValueError, match="at least two"):
        held_out_splits(libs[:1])


def test_a_feature_dropped_from_the_fit_gets_no_weight_and_the_rest_still_learn() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, len(FEATURES)))
    y = (x[:, 0] + x[:, FEATURES.index("consensus")] > 0).astype(float)
    data = fit.Featurized(x, y, [str(i) for i in range(200)], 1.0)
    full = fit.train(data)
    ablated = fit.train(data, drop=("consensus",))
    assert full.weights[FEATURES.index("consensus")] > 1.0
    assert ablated.weights[FEATURES.index("consensus")] == 0.0
    assert ablated.weights[0] > 1.0  # cos still carries its signal
    with pytest.raises(ValueError, match="unknown features"):
        fit.train(data, drop=("no-such-feature",))


def _metrics(dq: float, va: float) -> dict[str, Any]:
    qs = [question("i1", "internal")]
    m = system_metrics(qs, [record(True, "the answer is 42")])
    return {**m, "decision_quality": dq, "verdict_accuracy": va}


def test_the_tables_put_libraries_side_by_side_with_their_mean_and_the_change() -> None:
    by_library = {
        "a": {"systems": {"crag": _metrics(0.6, 0.8), "crag/x": _metrics(0.5, 0.9)}},
        "b": {"systems": {"crag": _metrics(0.8, 0.6), "crag/x": _metrics(0.7, 0.7)}},
    }
    table = libraries_table(by_library)
    assert "| crag | mean | 0.700 | 0.700 |" in table
    ablation = ablation_table(by_library, {"crag": "none", "crag/x": "x"})
    assert "| x | crag/x | 0.500 (-0.100) | 0.900 (+0.100) |" in ablation
    assert "0.600 (-0.100) | 0.800 (+0.100) |" in ablation  # the mean column
    json.dumps(by_library)  # every figure is plain JSON


def test_limit_bounds_the_questions_a_system_is_fitted_on_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from crag.context import Context
    from crag_lab import heldout

    folder = tmp_path / "b"
    folder.mkdir()
    rows = [question(f"q{i}", ("internal", "none")[i % 2]) | {"id": f"q{i}"} for i in range(9)]
    (folder / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    graded: list[int] = []

    async def grade_all(questions: Any, ctx: Any, on_done: Any = None) -> list[Any]:
        graded.append(len(questions))
        return []

    async def tune(graded_: Any, ctx: Any, step: float = 0.05) -> dict[str, Any]:
        return {
            "best": {"lower": 0.5, "upper": 0.6, "strip": {"strip_threshold": 0.1}, "accuracy": 1.0}
        }

    monkeypatch.setattr(heldout, "grade_all", grade_all)
    monkeypatch.setattr(heldout, "tune", tune)
    train = [parse(f"b={folder}", tmp_path / "homes")]
    variant = heldout.Variant("crag")
    asyncio.run(heldout.fit_variant(variant, train, Context(), tmp_path, limit=4))
    asyncio.run(heldout.fit_variant(variant, train, Context(), tmp_path))
    assert graded == [4, 9]
