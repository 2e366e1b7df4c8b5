"""`crag eval`: crag and the baselines on labelled questions, over one or several libraries.

`crag eval QUESTIONS.jsonl` measures one question set against the current home.
`crag eval [NAME=]FOLDER ...` measures library folders (questions.jsonl, grader_pairs.jsonl,
books/, external/), each in a home of its own under `--eval-home`, and prints them side by
side with their mean; `--held-out` fits each system on the other libraries first
(`crag_lab.heldout`), so every figure is one on a library the system was not fitted on.
Writes a report folder (report.md, metrics.json, records.jsonl, PNG plots; one per library).
Exit codes: 0 done, 1 some questions failed, 2 usage.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crag.cli.options import add_context_flags, positive_int
from crag.context import Context
from crag_lab import confidence
from crag_lab.cli import grid_step, measured_context
from crag_lab.dataset import load_pairs, load_questions, stratified
from crag_lab.report import (
    confidence_table,
    graders_table,
    libraries_table,
    sources_table,
    systems_table,
    write_set,
)

if TYPE_CHECKING:
    from crag_lab.evaluate import Evaluation

NAME = "eval"
HELP = "evaluate crag against naive RAG and the tutorial rule on labelled questions"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "sets",
        nargs="+",
        metavar="SET",
        help="questions.jsonl (eval/d2l schema), or one or more library folders "
        "[NAME=]FOLDER holding questions.jsonl (and grader_pairs.jsonl, books/, external/)",
    )
    parser.add_argument(
        "--pairs", type=Path, default=None, help="grader_pairs.jsonl: grader as a classifier"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="report folder (default reports/eval-<timestamp>)"
    )
    parser.add_argument(
        "--eval-home",
        type=Path,
        default=Path(".crag-eval"),
        help="library folders: each library's home is EVAL_HOME/NAME (default .crag-eval)",
    )
    parser.add_argument(
        "--ingest",
        action="store_true",
        help="library folders: ingest books/ and external/ into each library's home first "
        "(incremental: unchanged files cost a hash)",
    )
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="library folders: fit each system's grader weights and thresholds on the other "
        "libraries, then measure it on this one",
    )
    parser.add_argument(
        "--limit",
        type=positive_int(),
        default=None,
        help="first N questions of each library, taken round-robin across categories (with "
        "--held-out, also of those each system is fitted on)",
    )
    parser.add_argument(
        "--systems",
        default="crag,naive,tutorial",
        help="comma-separated: crag, similarity (crag with embedding similarity as the "
        "grader), features (crag with the feature evaluator as the grader), crag-relevance "
        "(relevance only: no recency, authority, completeness or conflict resolution), "
        "oracle (crag with a perfect reader: the questions' labels), naive, tutorial "
        "(default: crag,naive,tutorial)",
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
    from crag_lab import libraries as libs  # Chroma, the models, the graph: not for --help
    from crag_lab.evaluate import default_out
    from crag_lab.heldout import Variant, measure
    from crag_lab.runner import parse_systems

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    ctx = measured_context(args)
    systems = parse_systems(args.systems)
    graders = [g.strip() for g in args.graders.split(",") if g.strip()]
    _check_graders(graders, ctx)
    out = args.out or default_out()
    files = [s for s in args.sets if Path(s).is_file()]
    if files and len(args.sets) > 1:
        raise ValueError("give one questions file, or library folders (not both)")
    if files:
        if args.held_out:
            raise ValueError("--held-out needs library folders (each fitted on the others)")
        if args.ingest:
            raise ValueError("--ingest is for library folders; ingest into --home with crag ingest")
        result = asyncio.run(_one_set(Path(files[0]), ctx, systems, out, args))
        _print_one(result)
        return exit_code([result])
    libraries = libs.parse_all(args.sets, args.eval_home)
    if args.pairs is not None or ctx.origin("home") == "argument":
        raise ValueError(
            "--pairs and --home are for a questions file: a library folder's pairs are its "
            "grader_pairs.jsonl, and its home is under --eval-home"
        )
    if args.ingest:
        for lib in libraries:
            for line in libs.ingest(lib, ctx):
                print(line, file=sys.stderr)
    results = asyncio.run(
        measure(
            libraries,
            [Variant(system) for system in systems],
            ctx,
            out,
            held_out=args.held_out,
            limit=args.limit,
            quiet=args.quiet,
            grid_step=args.grid_step,
            graders=graders,
            log=lambda line: print(line, file=sys.stderr),
        )
    )
    fitted = {name: r.metrics.get("fitted_on") for name, r in results.items()}
    held = None
    if args.held_out and "crag" in systems:
        held = confidence.measure(
            {name: (r.questions, r.records["crag"]) for name, r in results.items()}, out
        )
    summary = write_set(out, {name: r.metrics for name, r in results.items()}, fitted, held)
    for name, result in results.items():
        print(f"\n## {name}" + _fitted_note(fitted[name]))
        print(systems_table(result.metrics["systems"]))
    print("\n## libraries side by side\n")
    print(libraries_table({name: r.metrics for name, r in results.items()}))
    if held:
        print("\n## crag's confidence, held out by library\n")
        print(confidence_table(held))
    print(f"\nreport: {summary}")
    return exit_code(list(results.values()))


def _check_graders(names: list[str], ctx: Context) -> None:
    """Each grader to compare can be built here, before any question runs (its results
    come last, after every question)."""
    from crag.api import check_ready, checked
    from crag.grading.registry import make_grader, uses_llm

    for name in names:
        gctx = checked(ctx.with_overrides(grader=name))
        check_ready(gctx)
        if uses_llm(gctx):  # a judge needs a chat model (not with --no-llm)
            make_grader(gctx, library=True)


def _fitted_note(on: list[str] | None) -> str:
    return f" (each system fitted on {', '.join(on)})" if on else " (defaults)"


async def _one_set(
    path: Path, ctx: Context, systems: list[str], out: Path, args: argparse.Namespace
) -> Evaluation:
    from crag_lab.evaluate import evaluate
    from crag_lab.protocol import pair_sources

    every_question = load_questions(path)
    pairs = load_pairs(args.pairs) if args.pairs else None
    questions = stratified(every_question, args.limit)
    _announce(questions, pairs, ctx, systems, out)
    return await evaluate(
        questions,
        ctx,
        systems=systems,
        out=out,
        pairs=pairs,
        pair_sources=pair_sources(pairs or [], every_question),
        questions_file=str(path),
        pairs_file=str(args.pairs or ""),
        quiet=args.quiet,
        grid_step=args.grid_step,
        graders=[g.strip() for g in args.graders.split(",") if g.strip()],
    )


def _announce(
    questions: list[Any], pairs: list[Any] | None, ctx: Context, systems: list[str], out: Path
) -> None:
    print(
        f"evaluating {', '.join(systems)} on {len(questions)} questions"
        + (f" and {len(pairs)} pairs" if pairs else "")
        + f" (grader {ctx.grading.grader}, chat model {ctx.models.chat_model}) → {out}",
        file=sys.stderr,
    )


def _print_one(result: Evaluation) -> None:
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


def exit_code(results: list[Evaluation], command: str = "crag eval") -> int:
    """1 when any question's run failed (said on stderr), else 0."""
    errors = sum(m["errors"] for r in results for m in r.metrics["systems"].values())
    if errors:
        print(f"{command}: {errors} question run(s) failed; see records.jsonl", file=sys.stderr)
        return 1
    return 0
