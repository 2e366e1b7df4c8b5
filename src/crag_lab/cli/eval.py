"""`crag eval QUESTIONS.jsonl`: crag and two baselines on a labelled question set.

Writes a report folder (report.md, metrics.json, records.jsonl, PNG plots) and
prints the side-by-side table. Exit codes: 0 done, 1 some questions failed, 2 usage.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from crag.cli.options import add_context_flags, positive_int
from crag_lab.cli import grid_step, measured_context
from crag_lab.dataset import load_pairs, load_questions, stratified
from crag_lab.evaluate import default_out, evaluate
from crag_lab.protocol import pair_sources
from crag_lab.report import graders_table, sources_table, systems_table
from crag_lab.runner import parse_systems

NAME = "eval"
HELP = "evaluate crag against naive RAG and the tutorial rule on labelled questions"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("questions", type=Path, help="questions.jsonl (shared/eval schema)")
    parser.add_argument(
        "--pairs", type=Path, default=None, help="grader_pairs.jsonl: grader as a classifier"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="report folder (default reports/eval-<timestamp>)"
    )
    parser.add_argument(
        "--limit",
        type=positive_int(),
        default=None,
        help="first N questions, taken round-robin across categories",
    )
    parser.add_argument(
        "--systems",
        default="crag,naive,tutorial",
        help="comma-separated: crag, crag-relevance (relevance only: no recency, authority, "
        "completeness or conflict resolution), naive, tutorial (default: crag,naive,tutorial)",
    )
    parser.add_argument(
        "--grid-step", type=grid_step(), default=0.05, help="threshold grid step of the surface"
    )
    parser.add_argument(
        "--graders",
        default="",
        help="also compare these graders (e.g. similarity,features,trained,judge): AUC, F1, "
        "accuracy and pairs/s on --pairs, and the verdict accuracy each gives",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_context_flags(parser)


def run(args: argparse.Namespace) -> int:
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    ctx = measured_context(args)
    systems = parse_systems(args.systems)
    every_question = load_questions(args.questions)
    questions = stratified(every_question, args.limit)
    pairs = load_pairs(args.pairs) if args.pairs else None
    out = args.out or default_out()
    print(
        f"evaluating {', '.join(systems)} on {len(questions)} questions"
        + (f" and {len(pairs)} pairs" if pairs else "")
        + f" (grader {ctx.grader}, chat model {ctx.chat_model}) → {out}",
        file=sys.stderr,
    )
    result = asyncio.run(
        evaluate(
            questions,
            ctx,
            systems=systems,
            out=out,
            pairs=pairs,
            pair_sources=pair_sources(pairs or [], every_question),
            questions_file=str(args.questions),
            pairs_file=str(args.pairs or ""),
            quiet=args.quiet,
            grid_step=args.grid_step,
            graders=[g.strip() for g in args.graders.split(",") if g.strip()],
        )
    )
    print(systems_table(result.metrics["systems"]))
    if result.metrics.get("graders"):
        print("\n" + graders_table(result.metrics["graders"]))
        print("\n" + sources_table(result.metrics["graders"]))
    grader = result.metrics.get("grader")
    if grader:
        at = grader["at"]["lower"]
        print(
            f"\ngrader {grader['name']}: AUC {grader['auc']:.3f}; at lower={at['threshold']:.2f} "
            f"P {at['precision']:.3f} R {at['recall']:.3f} F1 {at['f1']:.3f}"
        )
    surface = result.metrics.get("threshold_surface")
    if surface:
        best = surface["best"]
        print(
            f"thresholds: best lower={best['lower']:.2f} upper={best['upper']:.2f} "
            f"(accuracy {best['accuracy']:.3f}); run `crag tune` to tune the strip threshold too"
        )
    print(f"\nreport: {result.report}")
    errors = sum(m["errors"] for m in result.metrics["systems"].values())
    if errors:
        print(f"crag eval: {errors} question run(s) failed; see records.jsonl", file=sys.stderr)
        return 1
    return 0
