"""Metric functions: pure, numpy only, so each one can be checked on hand-made inputs.

Every system (crag and the baselines) is measured by the same `system_metrics` over
records of one shape (see `crag.evaluation.records`), so a difference in a table is a
difference between systems, never between two metric implementations.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

import numpy as np

from crag.text import normalize
from crag_lab.dataset import ANSWERABLE, CATEGORIES, VERDICTS, Question

# --- the grader as a classifier ----------------------------------------------------------


def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Area under the ROC curve = P(a random positive outscores a random negative),
    ties counting one half (the Mann-Whitney statistic, with average ranks).
    None when one class is missing."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=bool)
    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    _, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    average_rank = np.cumsum(counts) - (counts - 1) / 2.0  # 1-based, ties averaged
    ranks = average_rank[inverse]
    u = ranks[y].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def grouped_auc(
    scores: Sequence[float], labels: Sequence[bool], groups: Sequence[str]
) -> float | None:
    """AUC over the (positive, negative) pairs of the same group only: for one question,
    does the passage that answers it outscore the ones on its topic that do not? Pairs
    are pooled over groups (ties count one half); None without such a pair."""
    by_group: dict[str, tuple[list[float], list[float]]] = {}
    for s, y, g in zip(scores, labels, groups, strict=True):
        by_group.setdefault(g, ([], []))[0 if y else 1].append(float(s))
    wins = total = 0.0
    for pos, neg in by_group.values():
        if pos and neg:
            p, n = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
            wins += float((p > n).sum() + 0.5 * (p == n).sum())
            total += p.size * n.size
    return wins / total if total else None


def calibration(scores: Sequence[float], labels: Sequence[bool], bins: int = 10) -> dict[str, Any]:
    """How far scores read as probabilities are from the rates they claim: the Brier
    score (mean squared error) and the expected calibration error (in equal-width bins,
    |mean score - share relevant| weighted by the bin's size). None without scores."""
    p = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=float)
    if not len(p):
        return {"brier": None, "ece": None}
    gap = sum(
        abs(b["predicted"] - b["observed"]) * b["n"] for b in reliability(scores, labels, bins)
    )
    return {"brier": float(np.mean((p - y) ** 2)), "ece": float(gap / len(p))}


def _bin_of(p: np.ndarray, bins: int) -> np.ndarray:
    """Each score's equal-width bin (a score of 1 in the last): the bins of the
    reliability diagram, the ECE and its floor alike."""
    return np.clip((p * bins).astype(int), 0, bins - 1)


def reliability(
    scores: Sequence[float], labels: Sequence[bool], bins: int = 10
) -> list[dict[str, float]]:
    """The reliability diagram's points: per equal-width bin that holds a score, its
    range, size, mean score (predicted) and share of true labels (observed)."""
    p = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=float)
    which = _bin_of(p, bins)
    return [
        {
            "low": b / bins,
            "high": (b + 1) / bins,
            "n": int((which == b).sum()),
            "predicted": float(p[which == b].mean()),
            "observed": float(y[which == b].mean()),
        }
        for b in range(bins)
        if (which == b).any()
    ]


def ece_floor(
    scores: Sequence[float], bins: int = 10, draws: int = 2000, seed: int = 0
) -> dict[str, float | None]:
    """The expected calibration error a perfectly calibrated model with these scores
    shows on this many outcomes (each outcome drawn right with its score's probability):
    the median and 90th percentile over `draws` draws. On a hundred outcomes it is far
    from 0, so a measured ECE is read against it."""
    p = np.asarray(scores, dtype=float)
    if not len(p):
        return {"median": None, "p90": None}
    rng = np.random.default_rng(seed)
    which = _bin_of(p, bins)
    drawn = rng.random((draws, len(p))) < p
    gaps = np.zeros(draws)
    for b in np.unique(which):
        held = which == b
        gaps += held.sum() * np.abs(p[held].mean() - drawn[:, held].mean(axis=1))
    eces = gaps / len(p)
    return {"median": float(np.median(eces)), "p90": float(np.percentile(eces, 90))}


def classify(scores: Sequence[float], labels: Sequence[bool], threshold: float) -> dict[str, Any]:
    """A pair is predicted relevant when its score >= threshold (the rule that makes a
    document "good" in the grade node). Undefined precision/recall/F1 count as 0."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=bool)
    pred = s >= threshold
    tp = int((pred & y).sum())
    fp = int((pred & ~y).sum())
    fn = int((~pred & y).sum())
    tn = int((~pred & ~y).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "threshold": threshold,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "accuracy": (tp + tn) / len(y) if len(y) else 0.0,
    }


def best_accuracy(scores: Sequence[float], labels: Sequence[bool]) -> dict[str, float]:
    """The best accuracy any single cut-off reaches (an upper bound for a tuned threshold)."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=bool)
    if not len(s):
        return {"threshold": 0.0, "accuracy": 0.0}
    cuts = np.unique(np.concatenate([s, [np.inf]]))
    accs = [float(((s >= c) == y).mean()) for c in cuts]
    i = int(np.argmax(accs))
    return {"threshold": float(cuts[i]), "accuracy": accs[i]}


def grader_metrics(
    scores: Sequence[float],
    labels: Sequence[bool],
    thresholds: Mapping[str, float],
    groups: Sequence[str] | None = None,
) -> dict[str, Any]:
    """AUC, classification at each named threshold, best accuracy, and AUC per group."""
    result: dict[str, Any] = {
        "n": len(scores),
        "positives": int(sum(bool(x) for x in labels)),
        "auc": roc_auc(scores, labels),
        "at": {name: classify(scores, labels, t) for name, t in thresholds.items()},
        "best_accuracy": best_accuracy(scores, labels),
    }
    if groups is not None:
        by: dict[str, Any] = {}
        for group in sorted(set(groups)):
            idx = [i for i, g in enumerate(groups) if g == group]
            by[group] = {
                "n": len(idx),
                "auc": roc_auc([scores[i] for i in idx], [labels[i] for i in idx]),
            }
        result["by_group"] = by
    return result


# --- verdicts ----------------------------------------------------------------------------


def confusion(
    expected: Sequence[str], predicted: Sequence[str | None], labels: Sequence[str] = VERDICTS
) -> list[list[int]]:
    """Counts, rows = expected, columns = predicted, in `labels` order; pairs whose
    prediction is not a label (a system without verdicts) are left out."""
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for exp, pred in zip(expected, predicted, strict=True):
        if exp in index and pred in index:
            matrix[index[exp]][index[pred]] += 1
    return matrix


def accuracy(expected: Sequence[str], predicted: Sequence[str | None]) -> float | None:
    pairs = [(e, p) for e, p in zip(expected, predicted, strict=True) if p is not None]
    if not pairs:
        return None
    return sum(e == p for e, p in pairs) / len(pairs)


# --- latency -----------------------------------------------------------------------------


def percentile(values: Iterable[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear interpolation between order statistics
    (numpy's default); None for no values."""
    data = sorted(float(v) for v in values)
    if not data:
        return None
    rank = (len(data) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (rank - low)


def latency_summary(values: Sequence[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "mean": float(np.mean(values)) if len(values) else None,
    }


# --- answers and contexts ------------------------------------------------------------------


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def contains_any(text: str, answers: Sequence[str]) -> bool:
    """Case- and whitespace-insensitive containment of any of the answer aliases; a
    figure as a whole number ("128" is not in "1280", nor "3.9" in "3.90"), a word as
    written, inflected or in a name ("suppress" in "suppresses", "factory" in
    "default_factory")."""
    haystack = _norm(text)
    return any(_norm(a) and _found(_norm(a), haystack) for a in answers)


def _found(answer: str, haystack: str) -> bool:
    if not any(c.isdigit() for c in answer):
        return answer in haystack
    return re.search(rf"(?<!\d)(?<!\d\.){re.escape(answer)}(?!\d|\.\d)", haystack) is not None


def file_name(source: str) -> str:
    return PurePosixPath(source.replace("\\", "/")).name.lower()


def _squashed(text: str) -> str:
    return " ".join(normalize(text).lower().split())


def support_hit(question: Question, context: Sequence[Mapping[str, Any]]) -> bool:
    """The final context supports the question: a kept strip contains one of the
    `answers`, or the phrase a `support` entry names as its evidence (`hint`, compared
    in normal form, case and spacing aside)."""
    texts = [str(entry.get("text", "")) for entry in context]
    if question["answers"] and any(contains_any(t, question["answers"]) for t in texts):
        return True
    hints = [_squashed(s["hint"]) for s in question["support"] if s["hint"].strip()]
    squashed = [_squashed(t) for t in texts]
    return any(h in t for h in hints for t in squashed)


def support_file_hit(question: Question, context: Sequence[Mapping[str, Any]]) -> bool:
    """A looser support: a kept strip comes from a labelled support document (same file
    name), whatever part of it."""
    if support_hit(question, context):
        return True
    docs = {file_name(s["doc"]) for s in question["support"] if s["doc"]}
    return any(file_name(str(entry.get("source", ""))) in docs for entry in context)


def full_support(question: Question, context: Sequence[Mapping[str, Any]]) -> bool:
    """Every corpus named in `support` contributes a support document to the context:
    what a partial question needs (part of it is only in the books, part only outside)."""
    sources = {file_name(str(entry.get("source", ""))) for entry in context}
    corpora: dict[str, set[str]] = {}
    for s in question["support"]:
        if s["doc"]:
            corpora.setdefault(s["corpus"], set()).add(file_name(s["doc"]))
    return bool(corpora) and all(docs & sources for docs in corpora.values())


def tokens(text: str) -> int:
    """Whitespace-separated tokens: model-free, and the ratio is what matters."""
    return len(text.split())


def _rate(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def route_of(record: Mapping[str, Any]) -> str:
    """The verdict that chose the path (`ungraded` for a system without verdicts)."""
    return str(record.get("verdict") or "ungraded")


def asked_outside(record: Mapping[str, Any]) -> bool:
    """Whether a run asked an external source: a web path step other than a database
    (systems without the web path's sources: whether they wrote a web query)."""
    searched = record.get("searched")
    if searched is None:
        return bool(record.get("web_query"))
    return any(not entry.startswith("sql:") and "skipped" not in entry for entry in searched)


def conflict_metrics(
    questions: Sequence[Question], records: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """On a conflict set (questions with `expect` or `conflict`): the share of questions
    whose sources disagree that are resolved (the answer gives an `expect` value and no
    `reject` value), the share where the answer names the conflict, and on the control
    questions (sources that agree, or no single value asked) the share wrongly named one."""
    rows = [
        (q, r) for q, r in zip(questions, records, strict=True) if "conflict" in q or "expect" in q
    ]
    if not rows:
        return None
    disputed = [(q, r) for q, r in rows if q.get("conflict", True) and q.get("expect")]
    controls = [(q, r) for q, r in rows if not q.get("conflict", True)]

    def resolved(q: Question, r: Mapping[str, Any]) -> bool:
        answer = str(r.get("answer", ""))
        return (
            bool(r.get("answered"))
            and contains_any(answer, q.get("expect", []))
            and not contains_any(answer, q.get("reject", []))
        )

    return {
        "n": len(disputed),
        "resolved": _rate([resolved(q, r) for q, r in disputed]),
        "named": _rate([bool(r.get("conflicts")) for _, r in disputed]),
        "controls": len(controls),
        "false_conflicts": _rate([bool(r.get("conflicts")) for _, r in controls]),
        "controls_answered": _rate(
            [
                contains_any(str(r.get("answer", "")), q["expect"])
                for q, r in controls
                if q.get("expect")
            ]
        ),
    }


def verdict_of(record: Mapping[str, Any]) -> str | None:
    """A run's verdict; a run that failed has one no question expects."""
    return "error" if record.get("error") else record.get("verdict")


def right_decision(question: Question, record: Mapping[str, Any]) -> bool:
    """What a user gets, judged per question: an answerable question answered from a
    context that holds its evidence (`support_hit`, the strict measure), an
    unanswerable one declined."""
    if record.get("error"):  # a run that failed decided nothing
        return False
    if question["category"] in ANSWERABLE:
        return bool(record.get("answered")) and support_hit(question, record["context"])
    return not record.get("answered")


def decision_quality(by_category: Mapping[str, Mapping[str, Any]]) -> float | None:
    """The mean of the categories' `right_decision` rates: each category weighs the
    same, however many questions it has (a set of mostly answerable questions would
    otherwise reward never declining)."""
    rates = [
        c["decision_quality"] for c in by_category.values() if c.get("decision_quality") is not None
    ]
    return float(np.mean(rates)) if rates else None


def declines_by_reason(
    questions: Sequence[Question], records: Sequence[Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Per reason crag gave for declining (`decline_reason`): how many declines, how many
    of them were of answerable questions, and the reason's precision (the share of its
    declines that were of questions nothing answers)."""
    out: dict[str, dict[str, Any]] = {}
    for q, r in zip(questions, records, strict=True):
        if r.get("error") or r.get("answered"):
            continue
        row = out.setdefault(str(r.get("decline_reason") or "unknown"), {"n": 0, "answerable": 0})
        row["n"] += 1
        row["answerable"] += q["category"] in ANSWERABLE
    for row in out.values():
        row["precision"] = 1.0 - row["answerable"] / row["n"]
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["n"]))


def system_metrics(
    questions: Sequence[Question], records: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Every per-system metric over records aligned with `questions` (same order)."""
    if len(questions) != len(records):
        raise ValueError("one record per question is needed")
    # a question that failed to run counts in every rate, as a wrong decision and verdict
    # (dropped, a crash would score better than a wrong answer); timings are of runs
    ok = list(zip(questions, records, strict=True))
    ran = [(q, r) for q, r in ok if not r.get("error")]
    expected = [q["expected_verdict"] for q, _ in ok]
    graded = any(r.get("verdict") is not None for _, r in ran)
    predicted = [verdict_of(r) if graded else None for _, r in ok]

    by_category: dict[str, Any] = {}
    for cat in CATEGORIES:
        rows = [(q, r) for q, r in ok if q["category"] == cat]
        by_category[cat] = {
            "n": len(rows),
            "verdict_accuracy": accuracy(
                [q["expected_verdict"] for q, _ in rows],
                [verdict_of(r) if graded else None for _, r in rows],
            ),
            "decision_quality": _rate([right_decision(q, r) for q, r in rows]),
            "support_recall": _rate([support_hit(q, r["context"]) for q, r in rows])
            if cat in ANSWERABLE
            else None,
            "web_search_rate": _rate([asked_outside(r) for _, r in rows]),
        }

    answerable = [(q, r) for q, r in ok if q["category"] in ANSWERABLE]
    supported = [support_hit(q, r["context"]) for q, r in answerable]
    from_file = [support_file_hit(q, r["context"]) for q, r in answerable]
    found = [support_hit(q, r.get("candidates") or []) for q, r in answerable]
    with_answers = [(q, r) for q, r in answerable if q["answers"]]
    partial = [full_support(q, r["context"]) for q, r in ok if q["category"] == "partial"]
    nothing = [r for q, r in ok if q["category"] == "none"]
    # a run that failed declined nothing
    refused_none = [not r.get("answered") and not r.get("error") for r in nothing]
    answered_answerable = [bool(r.get("answered")) for _, r in answerable]

    context_tokens = [int(r["context_tokens"]) for _, r in ran]
    retrieved_tokens = [int(r["retrieved_tokens"]) for _, r in ran]
    per_question = [c / t for c, t in zip(context_tokens, retrieved_tokens, strict=True) if t]

    seconds = [float(r["seconds"]) for _, r in ran]
    routes: dict[str, list[float]] = {}
    paths: dict[str, str] = {}
    lanes: dict[str, list[float]] = {}  # the router's choice: fast or full
    for _, r in ran:
        routes.setdefault(route_of(r), []).append(float(r["seconds"]))
        paths.setdefault(route_of(r), " > ".join(r.get("path") or []))
        lanes.setdefault(str(r.get("route") or "none"), []).append(float(r["seconds"]))

    return {
        "n": len(records),
        "errors": len(records) - len(ran),
        "decision_quality": decision_quality(by_category),
        "verdict_accuracy": accuracy(expected, predicted) if graded else None,
        "confusion": {
            "labels": list(VERDICTS),
            "matrix": confusion(expected, predicted) if graded else None,
        },
        "by_category": by_category,
        "support_recall": _rate(supported),
        "support_recall_file": _rate(from_file),
        "support_recall_candidates": _rate(found),
        "support_n": len(supported),
        "partial_full_support": _rate(partial),
        "answer_containment": _rate(
            [contains_any(str(r.get("answer", "")), q["answers"]) for q, r in with_answers]
        ),
        "answer_containment_n": len(with_answers),
        "none": {
            "n": len(nothing),
            "refusal_rate": _rate(refused_none),
            # nothing in either corpus answers these: every answer given is unsupported
            "confident_wrong_rate": _rate([bool(r.get("answered")) for r in nothing]),
        },
        "answerable_refusal_rate": _rate([not a for a in answered_answerable]),
        "unsupported_answer_rate": _rate(
            [a and not s for a, s in zip(answered_answerable, supported, strict=True)]
        ),
        "declines_by_reason": declines_by_reason([q for q, _ in ok], [r for _, r in ok]),
        "web_search_rate": _rate([asked_outside(r) for _, r in ok]),
        "conflicts": conflict_metrics([q for q, _ in ok], [r for _, r in ok]),
        "compression": {
            "context_tokens": sum(context_tokens),
            "retrieved_tokens": sum(retrieved_tokens),
            "ratio": sum(context_tokens) / sum(retrieved_tokens) if sum(retrieved_tokens) else None,
            "mean_ratio": float(np.mean(per_question)) if per_question else None,
        },
        "latency": {
            "all": latency_summary(seconds),
            "by_route": {
                route: {**latency_summary(values), "path": paths[route]}
                for route, values in sorted(routes.items())
            },
            "by_router": {lane: latency_summary(v) for lane, v in sorted(lanes.items())},
        },
    }
