"""The evaluation's metric functions on small hand-made inputs with known answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crag.context import Context
from crag.grading.verdict import decide
from crag.prompts import NOT_FOUND
from crag.state import Grades, PartGrade, Passage
from crag_lab.baselines import tutorial_verdict, whole_documents
from crag_lab.dataset import Question, load_questions, stratified
from crag_lab.metrics import (
    accuracy,
    best_accuracy,
    calibration,
    classify,
    confusion,
    contains_any,
    ece_floor,
    full_support,
    percentile,
    roc_auc,
    support_file_hit,
    support_hit,
    system_metrics,
    tokens,
)
from crag_lab.protocol import loso_auc
from crag_lab.records import context_entries
from crag_lab.tuning import Graded, Surface, grid, replay_context, strip_sweep, sweep


def _q(
    qid: str,
    category: str = "internal",
    verdict: str = "correct",
    answers: list[str] | None = None,
    doc: str = "book.pdf",
) -> Question:
    return {
        "id": qid,
        "question": f"question {qid}?",
        "category": category,  # type: ignore[typeddict-item]
        "expected_verdict": verdict,
        "answers": answers or [],
        "reference_answer": "",
        "support": [{"corpus": "books", "doc": doc, "hint": ""}] if doc else [],
    }


# --- AUC ----------------------------------------------------------------------------------


def test_auc_of_a_perfect_ranking_is_one() -> None:
    assert roc_auc([0.1, 0.2, 0.8, 0.9], [False, False, True, True]) == 1.0


def test_auc_of_a_reversed_ranking_is_zero() -> None:
    assert roc_auc([0.9, 0.8, 0.2, 0.1], [False, False, True, True]) == 0.0


def test_auc_of_ties_is_one_half() -> None:
    assert roc_auc([0.5, 0.5, 0.5, 0.5], [True, False, True, False]) == 0.5


def test_auc_known_value_and_partial_ties() -> None:
    # 4 (pos, neg) pairs: 0.35>0.1, 0.35<0.4, 0.8>0.1, 0.8>0.4 → 3/4
    assert roc_auc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == 0.75
    # one tie between a positive and a negative counts one half: (1 + 0.5) / 2
    assert roc_auc([0.3, 0.5, 0.5], [False, False, True]) == 0.75


def test_calibration_of_honest_and_overconfident_scores() -> None:
    # 0.25 claimed where one in four is relevant, 0.75 where three in four are: calibrated
    labels = [True, False, False, False, True, True, True, False]
    honest = calibration([0.25] * 4 + [0.75] * 4, labels)
    assert honest["ece"] == pytest.approx(0.0)
    assert honest["brier"] == pytest.approx(0.1875)
    # 0.95 claimed where only half are relevant: off by 0.45
    sure = calibration([0.95] * 4, [True, True, False, False])
    assert sure["ece"] == pytest.approx(0.45)
    assert calibration([], []) == {"brier": None, "ece": None}


def test_ece_floor_is_the_noise_of_a_calibrated_model_and_shrinks_with_outcomes() -> None:
    # scores of 0 or 1 are always right: a calibrated model shows no error at all
    assert ece_floor([0.0, 1.0] * 50) == {"median": 0.0, "p90": 0.0}
    # one bin at 0.5: the ECE is |0.5 - share drawn right|, whose median on n outcomes
    # is about 0.337 / sqrt(n) (the median of a half-normal, times 0.5 / sqrt(n))
    few, many = ece_floor([0.5] * 100), ece_floor([0.5] * 2500)
    assert few["median"] == pytest.approx(0.0337, abs=0.01)
    assert many["median"] == pytest.approx(0.0067, abs=0.003)
    assert few["median"] <= few["p90"]
    assert ece_floor([0.5] * 100) == few  # seeded: the same floor run to run
    assert ece_floor([]) == {"median": None, "p90": None}


def test_loso_scores_each_source_with_a_model_that_never_saw_it() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(90, 2))
    y = (x[:, 0] + 0.3 * rng.normal(size=90) > 0).astype(float)
    sources = ["a"] * 30 + ["b"] * 30 + ["c"] * 30
    held = loso_auc(x, y, sources, {"first": 0, "second": 1})
    assert set(held["by_source"]) == {"a", "b", "c"}
    for row in held["by_source"].values():
        assert row["n"] == 30
        assert row["fitted"] > 0.85  # the signal in column 0 holds on every source
        assert 0.0 <= row["ece"] <= 1.0 and 0.0 <= row["brier"] <= 1.0
    assert held["overall"]["second"] < 0.7  # column 1 is noise


def test_auc_needs_both_classes() -> None:
    assert roc_auc([0.1, 0.2], [True, True]) is None


# --- the grader as a classifier ---------------------------------------------------------------


def test_classify_counts_the_threshold_itself_as_relevant() -> None:
    scores = [0.2, 0.35, 0.5, 0.9, 0.1]
    labels = [False, True, False, True, True]
    got = classify(scores, labels, 0.35)
    assert (got["tp"], got["fp"], got["fn"], got["tn"]) == (2, 1, 1, 1)
    assert got["precision"] == pytest.approx(2 / 3)
    assert got["recall"] == pytest.approx(2 / 3)
    assert got["f1"] == pytest.approx(2 / 3)
    assert got["accuracy"] == pytest.approx(3 / 5)


def test_classify_with_no_positive_prediction_scores_zero() -> None:
    got = classify([0.1, 0.2], [True, False], 0.9)
    assert got["precision"] == 0.0 and got["recall"] == 0.0 and got["f1"] == 0.0


def test_best_accuracy_finds_the_separating_cut() -> None:
    best = best_accuracy([0.1, 0.2, 0.7, 0.8], [False, False, True, True])
    assert best == {"threshold": 0.7, "accuracy": 1.0}


# --- verdicts ---------------------------------------------------------------------------------


def test_confusion_matrix_rows_expected_columns_predicted() -> None:
    expected = ["correct", "correct", "incorrect", "ambiguous", "ambiguous"]
    predicted = ["correct", "ambiguous", "incorrect", "correct", None]
    assert confusion(expected, predicted) == [[1, 0, 1], [0, 1, 0], [1, 0, 0]]
    assert accuracy(expected, predicted) == 0.5  # the None prediction is not counted
    assert accuracy(expected, [None] * 5) is None


# --- percentiles, containment, support ------------------------------------------------------


def test_percentiles_interpolate_like_numpy() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 50) == 2.5
    assert percentile(values, 95) == pytest.approx(3.85)
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 4.0
    rng = np.random.default_rng(0).random(37)
    for q in (5, 50, 95):
        assert percentile(rng, q) == pytest.approx(float(np.percentile(rng, q)))
    assert percentile([], 50) is None
    assert percentile([7.0], 95) == 7.0


def test_containment_ignores_case_and_spacing() -> None:
    assert contains_any("Norway won the most  medals", ["norway"])
    assert contains_any("in the year\n2018 ...", ["Year 2018"])
    assert not contains_any("Germany", ["Norway", ""])
    assert not contains_any("anything", [])
    # an answer is a whole number or word, not the start of another
    assert not contains_any("up to 1280 requests", ["128"]) and contains_any("128 MB", ["128"])
    assert not contains_any("Python 3.90", ["3.9"]) and contains_any("Python 3.9.", ["3.9"])
    assert contains_any("metafunc.parametrize(x)", ["parametrize"])  # a name's attribute
    assert contains_any("shutil.copy2()", ["copy2"]) and contains_any("suppresses", ["suppress"])


def test_support_by_answer_or_evidence_phrase_and_loosely_by_file_name() -> None:
    q = _q("a", answers=["7420"], doc="01_install.pdf")
    assert support_hit(q, [{"source": "x.md", "text": "listens on port 7420"}])
    same_file = [{"source": "library/01_install.pdf", "text": "unrelated"}]
    assert not support_hit(q, same_file) and support_file_hit(q, same_file)
    assert not support_file_hit(q, [{"source": "02_api.pdf", "text": "port 8080"}])
    assert not support_hit(q, []) and not support_file_hit(q, [])
    hinted = _q("h", doc="07_math.pdf")
    hinted["support"][0]["hint"] = "3.1.1.3 Analytic  Solution"
    assert support_hit(hinted, [{"source": "7.pdf", "text": "see 3.1.1.3 analytic\nsolution"}])
    typeset = _q("t", doc="b.pdf")
    typeset["support"][0]["hint"] = "Gauss-Newton step"
    assert support_hit(typeset, [{"source": "b.pdf", "text": "the Gauss–Newton step is"}])
    assert not support_hit(typeset, [{"source": "b.pdf", "text": "the Newton step"}])


def test_tokens_are_whitespace_words() -> None:
    assert tokens(" one two\nthree\t four ") == 4


# --- per-system metrics -------------------------------------------------------------------------


def _record(verdict: str | None, answer: str, context: list[dict[str, Any]], **kw: Any) -> dict:
    return {
        "verdict": verdict,
        "answer": answer,
        "context": context,
        "candidates": kw.get("candidates", context),
        "context_tokens": sum(tokens(c["text"]) for c in context),
        "retrieved_tokens": kw.get("retrieved", 10),
        "seconds": kw.get("seconds", 1.0),
        "path": kw.get("path", ["retrieve", "generate"]),
        "web_query": kw.get("web_query"),
        "error": kw.get("error"),
        # what the system's state says; the words of the answer are never read for it
        "answered": kw.get("answered", answer != NOT_FOUND),
    }


def test_refusal_versus_confident_wrong_on_unanswerable_questions() -> None:
    questions = [_q("n1", "none", "incorrect", doc=""), _q("n2", "none", "incorrect", doc="")]
    questions += [_q("n3", "none", "incorrect", doc="")]
    records = [
        _record("incorrect", NOT_FOUND, []),
        _record("ambiguous", "Something made up [1].", [{"source": "x", "text": "noise"}]),
        # declined in words an old substring test missed: the state is what counts
        _record("incorrect", "The sources do not say.", [], answered=False),
    ]
    m = system_metrics(questions, records)
    assert m["none"] == {
        "n": 3,
        "refusal_rate": pytest.approx(2 / 3),
        "confident_wrong_rate": pytest.approx(1 / 3),
    }
    assert m["support_recall"] is None  # no answerable question
    # a run that failed declined nothing, and answered nothing either
    failed = _record(None, "", [], answered=False, error="ValueError: too long")
    m = system_metrics([*questions, _q("n4", "none", "incorrect", doc="")], [*records, failed])
    assert m["none"]["refusal_rate"] == pytest.approx(2 / 4)
    assert m["none"]["confident_wrong_rate"] == pytest.approx(1 / 4)
    assert m["by_category"]["none"]["decision_quality"] == pytest.approx(2 / 4)


def test_system_metrics_on_a_small_set() -> None:
    questions = [
        _q("i1", answers=["dropout"], doc="b.pdf"),
        _q("e1", "external", "incorrect", doc="web.md"),
        _q("p1", "partial", "ambiguous", answers=["layer norm"], doc="ln.md"),
    ]
    records = [
        _record(
            "correct",
            "Dropout zeroes units [1].",
            [{"source": "b.pdf", "text": "dropout b"}],
            seconds=1.0,
            path=["retrieve", "grade", "refine", "generate"],
        ),
        _record(
            "ambiguous",
            "Nothing useful [1].",
            [{"source": "other.md", "text": "c d e"}],
            seconds=3.0,
            web_query="q",
        ),
        # the evidence was read, and refinement kept none of it
        _record(
            "correct",
            NOT_FOUND,
            [],
            seconds=2.0,
            candidates=[{"source": "ln.md", "text": "Layer norm normalises each example."}],
        ),
    ]
    m = system_metrics(questions, records)
    assert m["verdict_accuracy"] == pytest.approx(1 / 3)
    assert m["confusion"]["matrix"] == [[1, 0, 0], [0, 0, 1], [1, 0, 0]]
    assert m["support_recall"] == pytest.approx(1 / 3)
    assert m["support_recall_file"] == pytest.approx(1 / 3)
    assert m["support_recall_candidates"] == pytest.approx(2 / 3)
    assert m["answer_containment"] == 0.5 and m["answer_containment_n"] == 2
    assert m["answerable_refusal_rate"] == pytest.approx(1 / 3)
    assert m["unsupported_answer_rate"] == pytest.approx(1 / 3)  # e1: answered, no support
    assert m["web_search_rate"] == pytest.approx(1 / 3)
    assert m["compression"]["ratio"] == pytest.approx(5 / 30)
    assert m["latency"]["by_route"]["correct"]["n"] == 2
    assert m["latency"]["by_route"]["correct"]["p50"] == 1.5
    assert m["latency"]["all"]["p50"] == 2.0
    assert m["by_category"]["internal"]["support_recall"] == 1.0


def test_a_question_that_failed_counts_as_decided_wrong() -> None:
    questions = [_q("a"), _q("b")]
    records = [_record("correct", "x", []), _record(None, "", [], error="boom")]
    m = system_metrics(questions, records)
    assert m["errors"] == 1 and m["verdict_accuracy"] == 0.5
    assert m["latency"]["all"]["p50"] == 1.0  # timings are of the runs that ran
    # a crash never scores better than a wrong answer
    none = [_q("n1", "none", "incorrect", doc=""), _q("n2", "none", "incorrect", doc="")]
    answered = [_record("correct", "Made up [1].", [{"source": "x", "text": "noise"}])] * 2
    crashed = [_record(None, "", [], error="boom")] * 2
    assert system_metrics(none, crashed)["decision_quality"] == 0.0
    assert system_metrics(none, answered)["decision_quality"] == 0.0


def test_a_system_without_verdicts_has_no_accuracy() -> None:
    m = system_metrics([_q("a")], [_record(None, "x", [])])
    assert m["verdict_accuracy"] is None and m["confusion"]["matrix"] is None
    assert list(m["latency"]["by_route"]) == ["ungraded"]


# --- data selection ---------------------------------------------------------------------------


def test_limit_takes_questions_round_robin_across_categories() -> None:
    qs = [_q("i1"), _q("i2"), _q("i3"), _q("e1", "external"), _q("n1", "none")]
    assert [q["id"] for q in stratified(qs, 4)] == ["i1", "e1", "n1", "i2"]
    assert stratified(qs, None) == qs


def test_loading_rejects_an_unknown_category_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    good = _q("a")
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "category": "maybe"}) + "\n")
    with pytest.raises(ValueError, match=r"q.jsonl:2: unknown category"):
        load_questions(path)


# --- baselines' pieces -------------------------------------------------------------------------


def test_tutorial_route_on_crags_verdict_scale() -> None:
    assert tutorial_verdict(5, 5) == "correct"
    assert tutorial_verdict(2, 5) == "ambiguous"  # ANY irrelevant → web search too
    assert tutorial_verdict(0, 5) == "incorrect"
    assert tutorial_verdict(0, 0) == "incorrect"


def _doc(i: str, text: str, origin: str = "library") -> Passage:
    return {"id": i, "text": text, "origin": origin, "source": f"{i}.pdf", "similarity": 0.5}  # type: ignore[typeddict-item]


def test_whole_documents_keep_rank_order_and_sources() -> None:
    docs = [_doc("a", "Alpha text."), _doc("b", "Beta text.")]
    strips = whole_documents(docs)
    assert [s["text"] for s in strips] == ["Alpha text.", "Beta text."]
    entries = context_entries(strips, docs)
    assert [e["source"] for e in entries] == ["a.pdf", "b.pdf"]


# --- tuning ----------------------------------------------------------------------------------


def test_grid_is_inclusive_and_rounded() -> None:
    assert grid(0.25) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert grid(0.05)[7] == 0.35
    # a step that does not divide the span stops at the end, never past it
    assert grid(0.15) == [0.0, 0.15, 0.3, 0.45, 0.6, 0.75, 0.9, 1.0]
    assert grid(0.6) == [0.0, 0.6, 1.0] and grid(0.5, stop=0.9) == [0.0, 0.5, 0.9]


def _grades(scores: list[float], **found: Any) -> Grades:
    """What a grade node found for a question of one part, no fast path."""
    return Grades(
        **{
            "scores": scores,
            "first": scores,
            "simple": False,
            "parts": [],
            "asked": [],
            "meets": [[] for _ in scores],
            "never": [],
            "unknown": [],
            **found,
        }
    )


def test_threshold_sweep_replays_crags_verdict_rule() -> None:
    scores = [[0.9, 0.1], [0.1, 0.2], [0.5, 0.1]]
    expected = ["correct", "incorrect", "ambiguous"]
    axis = [0.0, 0.3, 0.6, 1.0]
    surface = sweep([_grades(s) for s in scores], expected, axis, axis)
    assert np.isnan(surface.accuracy[2, 1])  # lower > upper is not a valid setting
    assert surface.accuracy[1, 2] == 1.0  # lower 0.3, upper 0.6: all three right
    assert surface.best() == {"lower": 0.3, "upper": 0.6, "accuracy": 1.0}
    assert surface.to_dict()["accuracy"][2][1] is None


def test_the_fit_takes_the_best_neighbourhood_not_a_lone_best_point() -> None:
    axis = [0.5, 0.55, 0.6, 0.65, 0.7]
    accuracy = np.full((5, 5), 0.70)
    accuracy[1:4, 1:4] = 0.79  # a plateau: nearby thresholds do as well
    accuracy[2, 2] = 0.80
    accuracy[4, 4] = 0.81  # one question better, at a corner whose neighbours are worse
    accuracy[np.tril_indices(5, -1)] = np.nan  # lower > upper
    surface = Surface(axis, axis, accuracy, n=100)
    assert surface.best() == {"lower": 0.6, "upper": 0.6, "accuracy": 0.80}
    coarse = Surface([0.0, 0.3], [0.3, 0.6], np.array([[0.5, 0.6], [0.9, 0.4]]), n=10)
    assert coarse.best()["accuracy"] == 0.9  # no other point within the neighbourhood
    small = Surface([0.5, 0.55], [0.5, 0.55], np.array([[0.9, 0.6], [np.nan, 0.6]]), n=10)
    assert small.best()["accuracy"] == 0.9  # one neighbourhood for all: its best point


def test_strip_sweep_trades_support_against_declining() -> None:
    ctx = Context(home=Path("/nonexistent-crag-home"), max_strips=4)
    answerable = Graded(
        _q("i", answers=["dropout"], doc="a.pdf"),
        docs=[_doc("a", "Dropout zeroes units. It regularises.")],
        grades=_grades([0.9]),
    )
    hopeless = Graded(
        _q("n", "none", "incorrect", doc=""),
        docs=[_doc("b", "Unrelated text here.")],
        grades=_grades([0.1]),
        web_docs=[_doc("w", "Web noise here.", "external")],
    )
    # what score_strips would store: scores per knowledge set, keyed by its doc ids
    answerable.strip_scores[("a",)] = {("a", 0): 0.6}
    hopeless.strip_scores[("w",)] = {("w", 0): 0.3}
    assert [e["source"] for e in replay_context(hopeless, 0.35, 0.6, 0.0, ctx)] == ["w.pdf"]
    rows = strip_sweep([answerable, hopeless], 0.35, 0.6, [0.0, 0.5, 0.7], ctx)
    # each document graded relevant keeps its best strip: the strip threshold trims the
    # context but never empties it, so declining is the document grades' decision
    assert [r["support_recall"] for r in rows] == [1.0, 1.0, 1.0]
    assert [r["none_declined"] for r in rows] == [0.0, 0.0, 0.0]
    hopeless.web_docs = [{**hopeless.web_docs[0], "score": 0.1}]  # graded irrelevant
    hopeless.strip_scores[()] = {}  # nothing left to refine
    rows = strip_sweep([answerable, hopeless], 0.35, 0.6, [0.0, 0.7], ctx)
    assert [r["none_declined"] for r in rows] == [1.0, 1.0]
    assert [r["support_recall"] for r in rows] == [1.0, 1.0]


def test_a_plateau_of_best_thresholds_resolves_to_its_middle() -> None:
    from crag_lab.tuning import best_strip_threshold

    rows = [
        {"strip_threshold": t, "decision": d, "balanced": b}
        for t, d, b in [(0.0, 0.8, 0.4), (0.1, 0.8, 0.5), (0.2, 0.8, 0.7), (0.3, 0.6, 0.7)]
    ]
    assert best_strip_threshold(rows)["strip_threshold"] == 0.1
    # balanced: 0.2 and 0.3 tie at 0.7; 0.3's neighbourhood (0.7, 0.7) beats 0.2's (0.5, ...)
    assert best_strip_threshold(rows, "balanced")["strip_threshold"] == 0.3


def test_partial_questions_need_support_from_both_corpora() -> None:
    q = _q("p", "partial", "ambiguous", doc="book.pdf")
    q["support"].append({"corpus": "external", "doc": "web.md", "hint": ""})
    assert not full_support(q, [{"source": "book.pdf", "text": "x"}])
    assert full_support(q, [{"source": "book.pdf", "text": "x"}, {"source": "web.md", "text": "y"}])
    assert not full_support(_q("n", "none", doc=""), [{"source": "book.pdf", "text": "x"}])


def test_strips_are_scored_once_per_knowledge_set_in_one_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    import crag_lab.tuning as tuning
    from crag_lab.tuning import score_strips

    batches: list[list[str]] = []

    class Counting:
        name = "counting"

        async def ascore(self, question: str, passages: list[str]) -> list[float]:
            batches.append(list(passages))
            return [0.5] * len(passages)

    monkeypatch.setattr(tuning, "make_strip_grader", lambda ctx: Counting())
    ctx = Context(home=Path("/nonexistent-crag-home"))
    g = Graded(
        _q("p", "partial", "ambiguous"),
        docs=[_doc("a", "Alpha one. Alpha two."), _doc("b", "Beta one.")],
        grades=_grades([0.5, 0.1]),
        web_docs=[_doc("w", "Web one.", "external")],
    )
    asyncio.run(score_strips(g, 0.35, 0.6, ctx))  # ambiguous: the graded docs + web doc w
    asyncio.run(score_strips(g, 0.4, 0.6, ctx))  # same knowledge set: cached
    assert batches == [["Alpha one. Alpha two.", "Beta one.", "Web one."]]
    asyncio.run(score_strips(g, 0.3, 0.45, ctx))  # correct: the graded docs, a set of its own
    assert batches[1:] == [["Alpha one. Alpha two.", "Beta one."]]
    assert [e["source"] for e in replay_context(g, 0.35, 0.6, 0.5, ctx)] == [
        "a.pdf",
        "b.pdf",
        "w.pdf",
    ]


def test_sweep_replays_the_grade_nodes_whole_rule() -> None:
    # a library that never mentions a question's term can answer at best part of it
    assert sweep([_grades([0.9], never=["tiktok"])], ["ambiguous"], [0.5], [0.6]).accuracy[0, 0]
    assert sweep([_grades([0.9])], ["ambiguous"], [0.5], [0.6]).accuracy[0, 0] == 0.0
    # a good document about another version answers part of the question
    stale = _grades([0.9, 0.2], asked=["version 3"], meets=[[], ["version 3"]])
    assert decide(stale, 0.6, 0.5, None).verdict == "ambiguous"
    assert decide(stale, 0.6, 0.1, None).verdict == "correct"  # now the 0.2 one is good
    # a decomposed question: covered where a document explaining the part reaches upper
    parts = [PartGrade(text="a", top=0.9, explains=0.9), PartGrade(text="b", top=0.7, explains=0.4)]
    split = _grades([0.9, 0.7], parts=parts)
    assert decide(split, 0.6, 0.5, None).verdict == "ambiguous"
    assert decide(split, 0.3, 0.2, None).verdict == "correct"
    # the fast path: a simple question's clear winner on the first retrieval, alone
    simple = _grades([0.9, 0.5, 0.4], simple=True)
    fast = decide(simple, 0.6, 0.55, 0.15)
    assert (fast.verdict, fast.fast, fast.good) == ("correct", True, [0])
    assert not decide(simple, 0.6, 0.55, None).fast  # fast path off
    assert not decide(simple, 0.6, 0.55, 0.5).fast  # no clear gap
    assert not decide(_grades([0.9, 0.5, 0.4]), 0.6, 0.55, 0.15).fast  # not simple


# --- conflict sets ----------------------------------------------------------------------------


def test_conflicts_resolved_named_and_false_alarms() -> None:
    def q(i: str, conflict: bool, expect: list[str], reject: list[str]) -> Question:
        return {**_q(i), "expect": expect, "reject": reject, "conflict": conflict}

    questions = [
        q("c1", True, ["5680"], ["5570"]),
        q("c2", True, ["5680"], ["5570"]),
        q("c3", True, ["256 MB"], ["512 MB"]),
        q("k1", False, ["10 seconds"], []),
    ]
    conflict = [{"values": [], "preferred": "a", "reason": "it is newer", "by": "rule"}]
    records = [
        {**_record("correct", "Port 5680 [1].", []), "conflicts": conflict},
        _record("correct", "Port 5680 [1], or 5570 [2].", []),  # both values: not resolved
        {**_record("correct", NOT_FOUND, [], answered=False), "conflicts": conflict},
        {**_record("correct", "Every 10 seconds.", []), "conflicts": conflict},  # a false alarm
    ]
    m = system_metrics(questions, records)["conflicts"]
    assert m["n"] == 3 and m["controls"] == 1
    assert m["resolved"] == pytest.approx(1 / 3)
    assert m["named"] == pytest.approx(2 / 3)
    assert m["false_conflicts"] == 1.0 and m["controls_answered"] == 1.0
    assert system_metrics([_q("a")], [_record("correct", "x", [])])["conflicts"] is None


def test_loading_checks_the_conflict_fields(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    good = {**_q("a"), "expect": ["5680"], "reject": [], "conflict": True}
    path.write_text(json.dumps(good) + "\n")
    assert load_questions(path)[0]["expect"] == ["5680"]
    path.write_text(json.dumps({**good, "expect": "5680"}) + "\n")
    with pytest.raises(ValueError, match=r"q.jsonl:1: 'expect' must be a list of texts"):
        load_questions(path)
    path.write_text(json.dumps({**good, "conflict": "yes"}) + "\n")
    with pytest.raises(ValueError, match=r"'conflict' must be true or false"):
        load_questions(path)


def test_relevance_only_is_a_system_of_its_own() -> None:
    from crag_lab.runner import RELEVANCE_ONLY, parse_systems

    assert parse_systems("crag,crag-relevance") == ["crag", "crag-relevance"]
    ctx = Context(home=Path("/nonexistent-crag-home")).with_overrides(**RELEVANCE_ONLY)
    assert (
        ctx.confidence.weight_relevance,
        ctx.confidence.weight_recency,
        ctx.confidence.conflicts,
    ) == (1.0, 0.0, "off")
