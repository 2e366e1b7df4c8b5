"""`crag ablate [NAME=]FOLDER [NAME=]FOLDER ...`: each of crag's mechanisms switched off
alone, measured held out by library.

Every variant is fitted on the other libraries (its grader's weights where it has any,
thresholds with the mechanism off) and measured on each library in turn, beside
crag as it is. A mechanism pays for itself when switching it off costs decision quality
or verdict accuracy on a library it was not designed on.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

from crag.cli.options import add_context_flags, positive_int
from crag_lab.cli import grid_step, measured_context
from crag_lab.report import ablation_table

NAME = "ablate"
HELP = "switch off each of crag's mechanisms alone, measured held out by library"

#: Each mechanism, and the variant of crag without it: its label and overrides.
MECHANISMS: dict[str, tuple[str, dict[str, object]]] = {
    "coverage check and never-named terms": ("crag/no-coverage", {"coverage_check": False}),
    "constraint check (answer)": ("crag/no-constraint-check", {"verify": False}),
    "decomposition": ("crag/no-decomposition", {"decompose": False}),
    "fast path": ("crag/no-fast-path", {"fast_path": False}),
    # the default grader is plain similarity: its alternative is the feature evaluator
    # (answer types, consensus and lift over the batch, weights fitted held out)
    "similarity grading (the feature evaluator instead)": ("crag/features", {"grader": "features"}),
    "composite confidence": (
        "crag/no-composite",
        {
            "weight_relevance": 1.0,
            "weight_completeness": 0.0,
            "weight_recency": 0.0,
            "weight_authority": 0.0,
            "timely_recency_weight": 0.0,
        },
    ),
    "conflicts": ("crag/no-conflicts", {"conflicts": "off"}),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sets", nargs="+", metavar="[NAME=]FOLDER", help="library folders")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated variants to run (e.g. crag/no-fast-path); default all",
    )
    parser.add_argument("--eval-home", type=Path, default=Path(".crag-eval"))
    parser.add_argument("--ingest", action="store_true", help="ingest each library first")
    parser.add_argument("--out", type=Path, default=None, help="report folder")
    parser.add_argument("--limit", type=positive_int(), default=None)
    parser.add_argument("--grid-step", type=grid_step(), default=0.05)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_context_flags(parser)


def run(args: argparse.Namespace) -> int:
    from crag_lab import libraries as libs  # Chroma, the models, the graph: not for --help
    from crag_lab.cli.eval import exit_code
    from crag_lab.evaluate import default_out
    from crag_lab.heldout import Variant, measure

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    ctx = measured_context(args)
    libraries = libs.parse_all(args.sets, args.eval_home)
    wanted = {s.strip() for s in args.only.split(",") if s.strip()}
    known = {label for label, _ in MECHANISMS.values()}
    if wanted - known:
        raise ValueError(f"unknown variants {sorted(wanted - known)}; use {', '.join(known)}")
    variants = [Variant("crag")] + [
        Variant(*spec) for spec in MECHANISMS.values() if not wanted or spec[0] in wanted
    ]
    if args.ingest:
        for lib in libraries:
            for line in libs.ingest(lib, ctx):
                print(line, file=sys.stderr)
    out = args.out or default_out()
    if len(libraries) < 2:
        print("crag ablate: one library: measured at the defaults, not held out", file=sys.stderr)
    results = asyncio.run(
        measure(
            libraries,
            variants,
            ctx,
            out,
            held_out=len(libraries) > 1,
            limit=args.limit,
            quiet=args.quiet,
            grid_step=args.grid_step,
            log=lambda line: print(line, file=sys.stderr),
        )
    )
    by_library = {name: r.metrics for name, r in results.items()}
    labels = {label: name for name, (label, _) in MECHANISMS.items()} | {
        "crag": "(none: crag as it is)"
    }
    table = ablation_table(by_library, labels)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ablation.md").write_text(table + "\n")
    rows: dict[str, Any] = {
        name: {label: m["systems"][label] for label in m["systems"]}
        for name, m in by_library.items()
    }
    (out / "ablation.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(table)
    print(f"\nreport: {out / 'ablation.md'}")
    return exit_code(list(results.values()), "crag ablate")
