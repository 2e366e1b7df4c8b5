"""One evaluation run end to end: systems, grader pairs, metrics, surface, plots, report.

The Python entry point behind `crag eval`; callers get the metrics dict and the
records back, and the report folder on disk.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crag.context import Context
from crag.nodes.grade import fast_gap
from crag_lab import plots, report
from crag_lab.baselines import TUTORIAL_CUT
from crag_lab.dataset import Pair, Question
from crag_lab.grader_comparison import compare
from crag_lab.metrics import grader_metrics, system_metrics
from crag_lab.progress import Bar
from crag_lab.protocol import searched_in_library
from crag_lab.runner import run_questions, score_pairs
from crag_lab.tuning import grid, sweep

CONFIG_FIELDS = (
    "home",
    "tenant",
    "collection",
    "external",
    "external_collection",
    "embeddings",
    "grader",
    "chat_model",
    "judge_model",
    "k",
    "lower",
    "upper",
    "refine",
    "strip_sentences",
    "strip_threshold",
    "max_strips",
    "web_k",
    "weight_relevance",
    "weight_completeness",
    "weight_recency",
    "weight_authority",
    "timely_recency_weight",
    "recency_half_life_days",
    "authority",
    "dedup_threshold",
    "conflicts",
    "source_priority",
)


#: What the held-out protocol fits per system (`crag_lab.heldout`), shown per system.
FITTED_FIELDS = ("grader", "grader_file", "lower", "upper", "strip_threshold")


@dataclass
class Evaluation:
    metrics: dict[str, Any]
    records: dict[str, list[dict[str, Any]]]  # by system, aligned with `questions`
    report: Path
    questions: list[Question]


def default_out(now: datetime | None = None) -> Path:
    return Path("reports") / f"eval-{(now or datetime.now()).strftime('%Y%m%d-%H%M%S')}"


async def evaluate(
    questions: Sequence[Question],
    ctx: Context,
    *,
    systems: Sequence[str],
    out: Path,
    pairs: Sequence[Pair] | None = None,
    pair_sources: Sequence[str] = (),
    questions_file: str = "",
    pairs_file: str = "",
    quiet: bool = False,
    grid_step: float = 0.05,
    graders: Sequence[str] = (),
    contexts: Mapping[str, Context] | None = None,
    fitted_on: Sequence[str] = (),
) -> Evaluation:
    """`contexts`: a system's own context (thresholds fitted for it), by system label;
    the grader pairs and the threshold surface are crag's (`ctx`)."""
    started = time.perf_counter()
    bar = Bar(len(questions) * len(systems), "questions", quiet=quiet)
    records = await run_questions(questions, ctx, systems, bar, contexts)
    bar.close()

    metrics: dict[str, Any] = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "questions_file": questions_file,
        "pairs_file": pairs_file or None,
        "n_questions": len(questions),
        # the libraries each system was fitted on (held out); [] means the defaults
        "fitted_on": list(fitted_on),
        "config": {f: _plain(ctx.get(f)) for f in CONFIG_FIELDS},
        "systems": {s: system_metrics(questions, records[s]) for s in systems},
        "system_config": {
            s: {f: _plain(c.get(f)) for f in FITTED_FIELDS} for s, c in (contexts or {}).items()
        },
        "grader": None,
        "threshold_surface": None,
        "threshold_current": None,
        "notes": {
            "tokens": "whitespace-separated words",
            "tutorial_verdict": "all relevant → correct, some → ambiguous, none → incorrect",
            "latency": "wall seconds per question; systems interleaved question by question",
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    figures: dict[str, str] = {}

    if pairs:
        pair_bar = Bar(len(pairs), "pairs    ", quiet=quiet)
        scores = await score_pairs(
            pairs, ctx, pair_bar, [searched_in_library(s) for s in pair_sources]
        )
        pair_bar.close()
        labels = [p["relevant"] for p in pairs]
        cuts = {"lower": ctx.grading.lower, "upper": ctx.grading.upper, "tutorial": TUTORIAL_CUT}
        metrics["grader"] = {
            "name": ctx.grading.grader,
            **grader_metrics(scores, labels, cuts, pair_sources),
        }
        plain = ctx.with_overrides(grader="similarity", strip_weight=0.0)
        if plain.grading != ctx.grading:  # what plain cosine gives on the same pairs
            similar = await score_pairs(
                pairs,
                plain,
                Bar(len(pairs), "pairs sim ", quiet=True),
                [searched_in_library(s) for s in pair_sources],
            )
            metrics["grader"]["similarity"] = grader_metrics(similar, labels, {}, pair_sources)
        figures["score histograms"] = plots.score_histograms(
            scores,
            labels,
            {"lower": ctx.grading.lower, "upper": ctx.grading.upper},
            out / "score_hist.png",
        ).name

    if "crag" in records:
        done = [(q, r) for q, r in zip(questions, records["crag"], strict=True) if not r["error"]]
        # a cached answer was not graded in this run: it has no grades to replay
        done = [(q, r) for q, r in done if r.get("grades") and not r.get("cached")]
        grades = [r["grades"] for _, r in done]
        expected = [q["expected_verdict"] for q, _ in done]
        if done:
            axis = grid(grid_step)
            gap = fast_gap(ctx)
            surface = sweep(grades, expected, axis, axis, gap)
            metrics["threshold_surface"] = surface.to_dict()
            current = sweep(
                grades, expected, [ctx.grading.lower], [ctx.grading.upper], gap
            ).accuracy[0, 0]
            metrics["threshold_current"] = {
                "lower": ctx.grading.lower,
                "upper": ctx.grading.upper,
                "accuracy": float(current),
            }
            figures["threshold surface"] = plots.threshold_surface(
                metrics["threshold_surface"],
                (ctx.grading.lower, ctx.grading.upper),
                out / "threshold_surface.png",
            ).name

    if graders:
        metrics["graders"] = await compare(
            graders, ctx, questions, pairs or [], pair_sources, quiet=quiet
        )

    matrices = {
        s: m["confusion"]["matrix"]
        for s, m in metrics["systems"].items()
        if m["confusion"]["matrix"]
    }
    if matrices:
        figures["confusion matrices"] = plots.confusion_matrices(
            matrices, out / "confusion.png"
        ).name
    figures["latency"] = plots.latency_by_route(records, out / "latency.png").name
    metrics["seconds"] = round(time.perf_counter() - started, 2)
    path = report.write(out, metrics, records, figures)
    return Evaluation(metrics, records, path, list(questions))


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value
