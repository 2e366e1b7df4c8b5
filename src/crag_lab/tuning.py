"""Threshold tuning: grade each question once, then sweep the thresholds in memory.

The verdict depends only on what the grade node found (`Grades`) and the thresholds
(`crag.grading.verdict.decide`, the node's own rule), so one grading pass per question
(the expensive part: a model call per document with a judge) is enough for the whole
(lower, upper) grid. With an LLM grader, a question that took the fast path is
replayed at other thresholds on its cheap scores: the judge never graded it. The
strip threshold is swept the same way afterwards, at the best (lower, upper), from
cached strip scores.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from crag.context import Context
from crag.grading.registry import make_strip_grader
from crag.grading.verdict import decide
from crag.nodes.grade import fast_gap
from crag.nodes.refine import decompose, knowledge_for, relevant_ids, select, strip_key
from crag.state import Grades, InputState, Passage, State
from crag_lab.dataset import ANSWERABLE, Question
from crag_lab.metrics import support_hit
from crag_lab.partial import steps
from crag_lab.records import ContextEntry, context_entries


def grid(step: float = 0.05, start: float = 0.0, stop: float = 1.0) -> list[float]:
    """Evenly spaced thresholds from start to stop inclusive, rounded for display."""
    if not 0 < step <= stop - start:
        raise ValueError(f"grid step must be in (0, {stop - start:g}], got {step:g}")
    count = math.floor((stop - start) / step + 1e-9)  # no point past `stop` (0.15 steps)
    points = [round(start + i * step, 4) for i in range(count + 1)]
    return points if math.isclose(points[-1], stop) else [*points, round(stop, 4)]


def _tie_break(values: np.ndarray, window: int = 1) -> int:
    """Flat index of the best value; among equal bests, the one whose neighbours score
    highest, and among those the middle one (the middle of a plateau is safer on new
    data than its edge)."""
    flat_best = np.nanmax(values)
    smooth = np.full(values.shape, -np.inf)
    for index in zip(*np.nonzero(np.isclose(values, flat_best)), strict=True):
        box = tuple(slice(max(0, i - window), i + window + 1) for i in index)
        smooth[index] = np.nanmean(values[box])
    flat = smooth.ravel()
    tied = np.flatnonzero(np.isclose(flat, flat.max()))
    return int(tied[len(tied) // 2])


#: Thresholds this close read alike: scores move by about this much with a passage's
#: wording, so a fit trusts the accuracy of a neighbourhood, not of one grid point.
NEIGHBOURHOOD = 0.05


def _near(axis: Sequence[float], value: float) -> np.ndarray:
    return np.abs(np.asarray(axis) - value) <= NEIGHBOURHOOD + 1e-9


@dataclass
class Surface:
    """Verdict accuracy over a (lower, upper) grid; NaN where lower > upper."""

    lowers: list[float]
    uppers: list[float]
    accuracy: np.ndarray
    n: int

    def smoothed(self) -> np.ndarray:
        """Each point's accuracy averaged over the valid points within `NEIGHBOURHOOD` of
        it on both axes: on a flat surface one question moves the raw best from one edge
        of a plateau to another, and the fitted thresholds with it."""
        out = np.full(self.accuracy.shape, np.nan)
        for i, j in zip(*np.nonzero(~np.isnan(self.accuracy)), strict=True):
            box = self.accuracy[
                np.ix_(_near(self.lowers, self.lowers[i]), _near(self.uppers, self.uppers[j]))
            ]
            out[i, j] = np.nanmean(box)
        return out

    def best(self) -> dict[str, float]:
        """The point of the best neighbourhood (`smoothed`); among equals, the best point,
        and among those the middle one."""
        smooth = self.smoothed()
        tied = np.isclose(smooth, np.nanmax(smooth))
        flat = _tie_break(np.where(tied, self.accuracy, np.nan), window=0)
        i, j = np.unravel_index(flat, self.accuracy.shape)
        return {
            "lower": self.lowers[int(i)],
            "upper": self.uppers[int(j)],
            "accuracy": float(self.accuracy[i, j]),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "lowers": self.lowers,
            "uppers": self.uppers,
            "accuracy": [[None if math.isnan(v) else v for v in row] for row in self.accuracy],
            "best": self.best(),
        }


def sweep(
    graded: Sequence[Grades],
    expected: Sequence[str],
    lowers: Sequence[float],
    uppers: Sequence[float],
    gap: float | None = None,
) -> Surface:
    """Verdict accuracy of the grade node's rule (`decide`, fast path gap `gap`) at
    every grid point."""
    acc = np.full((len(lowers), len(uppers)), np.nan)
    for i, lower in enumerate(lowers):
        for j, upper in enumerate(uppers):
            if lower > upper:
                continue
            hits = [
                decide(grades, upper, lower, gap).verdict == exp
                for grades, exp in zip(graded, expected, strict=True)
            ]
            acc[i, j] = sum(hits) / len(hits) if hits else np.nan
    return Surface(list(lowers), list(uppers), acc, len(expected))


# --- grading once per question ----------------------------------------------------------------


@dataclass
class Graded:
    """One question, graded once: the documents graded, what the grader found, the
    web results, and the strip scores of each knowledge set refined so far."""

    question: Question
    docs: list[Passage]
    grades: Grades
    gap: float | None = None  # the fast path's gap (None: off)
    web_docs: list[Passage] = field(default_factory=list)
    strip_scores: dict[tuple[str, ...], dict[tuple[str, int], float]] = field(default_factory=dict)

    def knowledge(self, lower: float, upper: float) -> list[Passage]:
        """What refine would get at these thresholds (`knowledge_for` of the verdict)."""
        decision = decide(self.grades, upper, lower, self.gap)
        scores = self.grades["scores"]
        scored = [cast(Passage, {**d, "score": s}) for d, s in zip(self.docs, scores, strict=True)]
        state: State = {
            "question": self.question["question"],
            "verdict": decision.verdict,
            "docs": scored,
            "route": "fast" if decision.fast else "full",
            "good_docs": [scored[i] for i in decision.good],
            "web_docs": self.web_docs,
        }
        return knowledge_for(state, lower)


def _key(docs: Sequence[Passage]) -> tuple[str, ...]:
    return tuple(d["id"] for d in docs)


async def grade_question(q: Question, ctx: Context) -> Graded:
    """Retrieve and grade with crag's own nodes, and search the web once, so that the
    verdict and the knowledge to refine can be replayed at any thresholds."""
    run = steps("split", "retrieve", "grade", "rewrite", "web_search")
    state = await run.ainvoke(InputState(question=q["question"]), context=ctx)
    grades = state["grades"]
    # the documents graded come first; the web path's library results follow them
    graded = (state.get("docs") or [])[: len(grades["scores"])]
    return Graded(q, graded, grades, fast_gap(ctx), state.get("web_docs") or [])


async def score_strips(graded: Graded, lower: float, upper: float, ctx: Context) -> None:
    """Score the strips of the knowledge set these thresholds select, in one batch as
    the refine node does (a batch-aware grader scores a strip by its neighbours too)."""
    knowledge = graded.knowledge(lower, upper)
    if _key(knowledge) in graded.strip_scores:
        return
    strips = decompose(knowledge, ctx.refinement.strip_sentences)
    grader = make_strip_grader(ctx)
    scores = await grader.ascore(graded.question["question"], [s["text"] for s in strips])
    graded.strip_scores[_key(knowledge)] = {
        strip_key(s): round(float(v), 4) for s, v in zip(strips, scores, strict=True)
    }


def replay_context(
    graded: Graded, lower: float, upper: float, strip_threshold: float, ctx: Context
) -> list[ContextEntry]:
    """The refined context crag would build at these thresholds (no model calls; the
    knowledge set's strips must have been scored by `score_strips`)."""
    knowledge = graded.knowledge(lower, upper)
    scored = graded.strip_scores[_key(knowledge)]
    strips = decompose(knowledge, ctx.refinement.strip_sentences)
    for strip in strips:
        strip["score"] = scored[strip_key(strip)]
    relevant = relevant_ids(knowledge, lower)
    kept = select(strips, strip_threshold, ctx.refinement.max_strips, relevant=relevant)
    return context_entries(kept, knowledge)


STRIP_OBJECTIVES = ("decision", "balanced")


def strip_sweep(
    graded: Sequence[Graded],
    lower: float,
    upper: float,
    thresholds: Sequence[float],
    ctx: Context,
) -> list[dict[str, Any]]:
    """Per strip threshold: support recall (answerable), decline rate (`none`: empty
    context means crag declines), their question-weighted mean `decision`, and their
    plain mean `balanced` (which weighs declining as much as finding support)."""
    rows = []
    for t in thresholds:
        supported, declined, decisions, kept, empty_answerable = [], [], [], [], []
        for g in graded:
            context = replay_context(g, lower, upper, t, ctx)
            kept.append(len(context))
            if g.question["category"] in ANSWERABLE:
                hit = support_hit(g.question, context)
                supported.append(hit)
                empty_answerable.append(not context)
                decisions.append(hit)
            else:
                declined.append(not context)
                decisions.append(not context)
        rows.append(
            {
                "strip_threshold": t,
                "decision": _mean(decisions),
                "balanced": _mean(
                    [x for x in (_mean(supported), _mean(declined)) if x is not None]
                ),
                "support_recall": _mean(supported),
                "none_declined": _mean(declined),
                "answerable_empty": _mean(empty_answerable),
                "mean_kept_strips": _mean(kept),
            }
        )
    return rows


def _mean(values: Sequence[float | bool]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def best_strip_threshold(
    rows: Sequence[dict[str, Any]], objective: str = "decision"
) -> dict[str, Any]:
    if objective not in STRIP_OBJECTIVES:
        raise ValueError(f"strip objective must be one of {', '.join(STRIP_OBJECTIVES)}")
    values = np.array([np.nan if r[objective] is None else r[objective] for r in rows])
    return {**rows[_tie_break(values)], "objective": objective}


async def grade_all(
    questions: Sequence[Question],
    ctx: Context,
    *,
    on_done: Callable[[Question], None] | None = None,
) -> list[Graded]:
    """Grade every question once (the cache that the sweeps read)."""
    out = []
    for q in questions:
        out.append(await grade_question(q, ctx))
        if on_done is not None:
            on_done(q)
    return out


async def tune(
    graded: Sequence[Graded],
    ctx: Context,
    *,
    step: float = 0.05,
    strip_step: float = 0.05,
    strip_objective: str = "decision",
) -> dict[str, Any]:
    """Best (lower, upper) by verdict accuracy, then the best strip threshold there.

    The strip threshold is judged by `strip_objective` (see `strip_sweep`), at the best
    and at the current (lower, upper), so the two settings compare end to end.
    """
    axis = grid(step)
    grades = [g.grades for g in graded]
    expected = [g.question["expected_verdict"] for g in graded]
    gap = fast_gap(ctx)
    surface = sweep(grades, expected, axis, axis, gap)
    best = surface.best()
    current = float(
        sweep(grades, expected, [ctx.grading.lower], [ctx.grading.upper], gap).accuracy[0, 0]
    )
    for g in graded:
        await score_strips(g, best["lower"], best["upper"], ctx)
        await score_strips(g, ctx.grading.lower, ctx.grading.upper, ctx)
    strips = strip_sweep(graded, best["lower"], best["upper"], grid(strip_step, 0.0, 0.9), ctx)
    current_strips = strip_sweep(
        graded, ctx.grading.lower, ctx.grading.upper, [ctx.refinement.strip_threshold], ctx
    )[0]
    return {
        "surface": surface.to_dict(),
        "best": {**best, "strip": best_strip_threshold(strips, strip_objective)},
        "current": {
            "lower": ctx.grading.lower,
            "upper": ctx.grading.upper,
            "accuracy": current,
            "strip": current_strips,
        },
        "strip_rows": strips,
        "grader": ctx.grading.grader,
    }
