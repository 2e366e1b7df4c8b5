"""`crag tune [QUESTIONS.jsonl]`: find the thresholds that fit a labelled question set.

Grades each question's retrieved documents once (and, for the strip threshold, the
strips of those documents and of one external search), then sweeps every
threshold in memory. `--save` writes the best values to CRAG_HOME/settings.json,
which `crag ask` and `crag eval` read (env vars and flags still win).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import sys
from pathlib import Path
from typing import Any

from crag.cli.options import add_context_flags, positive_int
from crag.context import Context
from crag.settings import save_settings
from crag_lab.cli import grid_step, measured_context
from crag_lab.dataset import load_questions, stratified
from crag_lab.progress import Bar
from crag_lab.report import fmt, surface_grid

NAME = "tune"
HELP = "grid-search the verdict and strip thresholds on labelled questions"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("questions", type=Path, help="labelled questions (questions.jsonl schema)")
    parser.add_argument(
        "--limit", type=positive_int(), default=None, help="first N, round-robin by category"
    )
    parser.add_argument("--grid-step", type=grid_step(), default=0.05, help="lower/upper grid step")
    parser.add_argument(
        "--strip-step", type=grid_step(0.9), default=0.05, help="strip threshold step"
    )
    parser.add_argument(
        "--strip-objective",
        choices=("decision", "balanced"),
        default="decision",
        help="decision: share of questions handled right (supported context, or empty on "
        "`none`); balanced: mean of support recall and the decline rate on `none`",
    )
    parser.add_argument(
        "--test",
        type=Path,
        default=None,
        help="another library's questions: report the verdict accuracy the thresholds "
        "fitted here give there (held out), beside that library's own best (in-sample)",
    )
    parser.add_argument(
        "--test-home", type=Path, default=None, help="the home of --test's library (its store)"
    )
    parser.add_argument("--save", action="store_true", help="write the best values to settings")
    parser.add_argument("--out", type=Path, default=None, help="write tune.json and a plot here")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_context_flags(parser)


def render(result: dict[str, Any]) -> str:
    best, current = result["best"], result["current"]
    strip = best["strip"]
    lines = [
        f"grader: {result['grader']}, {result['surface']['n']} questions",
        f"best:    lower={best['lower']:.2f} upper={best['upper']:.2f} "
        f"verdict accuracy {best['accuracy']:.3f}",
        f"current: lower={current['lower']:.2f} upper={current['upper']:.2f} "
        f"verdict accuracy {fmt(current['accuracy'])}",
        "",
        "verdict accuracy (rows lower, columns upper; every other grid line):",
        surface_grid(result["surface"]),
        "",
        "strip threshold at the best lower/upper (decision = share of questions with a "
        "supported context, or an empty one on `none`; balanced = mean of support recall "
        "and none declined):",
        "| strip threshold | decision | balanced | support recall | none declined "
        "| answerable empty | kept strips |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["strip_rows"]:
        lines.append(
            f"| {row['strip_threshold']:.2f} | {fmt(row['decision'])} | {fmt(row['balanced'])} | "
            f"{fmt(row['support_recall'])} | {fmt(row['none_declined'])} | "
            f"{fmt(row['answerable_empty'])} | {fmt(row['mean_kept_strips'], 1)} |"
        )
    if test := result.get("test"):
        own = test["own_best"]
        lines[3:3] = [
            f"held out: {test['questions']} ({test['n']} questions) at the best thresholds "
            f"here: verdict accuracy {test['held_out_accuracy']:.3f} (its own best, in-sample: "
            f"{own['accuracy']:.3f} at lower={own['lower']:.2f} upper={own['upper']:.2f})",
        ]
    cur = current["strip"]
    lines += [
        "",
        f"best strip threshold by {strip['objective']}: {strip['strip_threshold']:.2f} "
        f"(decision {fmt(strip['decision'])}, balanced {fmt(strip['balanced'])}, support "
        f"recall {fmt(strip['support_recall'])}); current {cur['strip_threshold']:.2f} at "
        f"current lower/upper: decision {fmt(cur['decision'])}, balanced {fmt(cur['balanced'])}",
    ]
    return "\n".join(lines)


def beats_current(result: dict[str, Any]) -> bool:
    """Whether the fitted thresholds do better than the current ones end to end: more
    verdicts right, or as many and a better strip objective. A few labelled questions
    leave wide plateaus, and a tie is no reason to move a threshold."""
    best, current = result["best"], result["current"]
    if current["accuracy"] is None:
        return True
    if not math.isclose(best["accuracy"], current["accuracy"]):
        return bool(best["accuracy"] > current["accuracy"])
    objective = best["strip"]["objective"]
    fitted, now = best["strip"][objective], current["strip"][objective]
    return now is None or (fitted is not None and fitted > now and not math.isclose(fitted, now))


def run(args: argparse.Namespace) -> int:
    from crag.nodes.grade import fast_gap
    from crag_lab.plots import threshold_surface
    from crag_lab.runner import warm_up
    from crag_lab.tuning import grade_all, grid, sweep, tune

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    ctx = measured_context(args)
    path = args.questions
    questions = stratified(load_questions(path), args.limit)
    if not args.quiet:
        print(
            f"tuning on {len(questions)} questions of {path} (grader {ctx.grading.grader})",
            file=sys.stderr,
        )
    bar = Bar(len(questions), "grading", quiet=args.quiet or args.json)

    async def grade_and_tune() -> dict[str, Any]:
        await asyncio.to_thread(warm_up, ctx)
        graded = await grade_all(questions, ctx, on_done=lambda q: bar.advance(q["id"]))
        bar.close()
        return await tune(
            graded,
            ctx,
            step=args.grid_step,
            strip_step=args.strip_step,
            strip_objective=args.strip_objective,
        )

    async def held_out(best: dict[str, Any]) -> dict[str, Any]:
        tctx = ctx.with_overrides(home=args.test_home) if args.test_home else ctx
        tests = load_questions(args.test)
        await asyncio.to_thread(warm_up, tctx)
        graded = await grade_all(tests, tctx)
        grades = [g.grades for g in graded]
        expected = [g.question["expected_verdict"] for g in graded]
        gap = fast_gap(tctx)
        axis = grid(args.grid_step)
        there = sweep(grades, expected, [best["lower"]], [best["upper"]], gap).accuracy[0, 0]
        return {
            "questions": str(args.test),
            "n": len(tests),
            "held_out_accuracy": float(there),
            "own_best": sweep(grades, expected, axis, axis, gap).best(),
        }

    result = asyncio.run(grade_and_tune())
    if args.test is not None:
        result["test"] = asyncio.run(held_out(result["best"]))
    print(json.dumps(result, indent=2) if args.json else render(result))

    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "tune.json").write_text(json.dumps(result, indent=2) + "\n")
        threshold_surface(
            result["surface"],
            (ctx.grading.lower, ctx.grading.upper),
            args.out / "threshold_surface.png",
        )
    if args.save and not beats_current(result):
        print(
            "saved nothing: the current thresholds do as well on these questions",
            file=sys.stderr,
        )
    elif args.save:
        best = result["best"]
        values = {
            "lower": best["lower"],
            "upper": best["upper"],
            "strip_threshold": best["strip"]["strip_threshold"],
        }
        Context(home=ctx.store.home, **values)  # refused here, never saved, if not valid
        saved = save_settings(ctx.store.home, values)
        print(f"saved {values} to {saved}", file=sys.stderr)
        default_grader = Context(home=ctx.store.home).grading.grader
        if default_grader != ctx.grading.grader:
            print(
                f"note: tuned with grader {ctx.grading.grader!r}, but runs on {ctx.store.home} "
                "default to "
                f"{default_grader!r}; thresholds are grader-specific (set CRAG_GRADER)",
                file=sys.stderr,
            )
    return 0
