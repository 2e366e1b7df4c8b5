"""`crag demo`: ingest the bundled sample library, then ask its demo questions.

The sample is a fictional product handbook (three PDFs) plus a few "web pages"
(markdown) that stand in for the external source, so that the questions show all
three verdicts offline. It goes into the same home that `crag ask`, `crag chat`
and `langgraph dev` read, so the next question can be the user's own.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from crag.cli.ask import progress, render
from crag.cli.options import add_context_flags, context_from_args
from crag.context import Context
from crag.ingest.progress import Progress, format_summary
from crag.text import printable

NAME = "demo"
HELP = "ingest the sample library and ask its demo questions"


def default_samples() -> Path | None:
    """The repo's samples/ folder (next to src/ in a checkout or editable install)."""
    for base in (Path.cwd(), *Path(__file__).resolve().parents):
        candidate = base / "samples"
        if (candidate / "questions.jsonl").is_file():
            return candidate
    return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--samples", type=Path, default=None, help="samples folder")
    add_context_flags(parser)


def holds_answer(item: dict[str, Any], result: dict[str, Any]) -> bool:
    """Whether the answer states one of the facts the sample expects, or declines where
    it expects none: the verdict alone does not say whether the answer is right."""
    if not item["answers"]:
        return not result["answered"]

    def states(fact: str) -> bool:  # "USD 8", not "USD 80"
        return re.search(rf"(?<!\w){re.escape(fact)}(?!\w)", result["answer"], re.I) is not None

    return bool(result["answered"]) and any(states(a) for a in item["answers"])


def _ingest(ctx: Context, folder: Path, collection: str) -> int:
    from crag.ingest.indexer import ingest_path  # Chroma and the embeddings: not for --help

    result = ingest_path(ctx, folder, collection=collection, on_event=Progress(quiet=False))
    print(format_summary(result.to_dict()), file=sys.stderr)
    return result.exit_code


def run(args: argparse.Namespace) -> int:
    samples = args.samples or default_samples()
    if args.samples is not None and not (args.samples / "questions.jsonl").is_file():
        print(f"crag demo: error: {args.samples} holds no questions.jsonl", file=sys.stderr)
        return 2
    if samples is None or not (samples / "questions.jsonl").is_file():
        print("crag demo: error: no samples folder found; pass --samples DIR", file=sys.stderr)
        return 2
    from crag.api import ask, check_ready, summary  # LangGraph and the models: not for --help

    ctx = context_from_args(args)
    check_ready(ctx)  # a missing key fails now, not after the ingest
    print(f"== ingesting the sample library into {ctx.store.home}", file=sys.stderr)
    for folder, collection in (
        (samples / "library", ctx.store.collection),
        (samples / "external", ctx.search.external_collection),
    ):
        if _ingest(ctx, folder, collection) != 0:
            return 1
    questions = [json.loads(line) for line in (samples / "questions.jsonl").open() if line.strip()]
    rows = []
    for item in questions:
        print(f"\n== {item['question']}", file=sys.stderr)
        start = time.perf_counter()
        result = summary(ask(item["question"], context=ctx, on_step=progress))
        rows.append((item, result, time.perf_counter() - start))
        print(printable(render(result)), flush=True)
    print("\n== summary")
    print(f"{'expected':<10} {'verdict':<10} {'answer':<7} {'seconds':>7}  question")
    for item, result, seconds in rows:
        mark = "holds" if holds_answer(item, result) else "misses"
        print(
            f"{item['expected_verdict']:<10} {result['verdict']:<10} {mark:<7} {seconds:7.1f}  "
            f"{item['question'][:60]}"
        )
    matched = sum(item["expected_verdict"] == result["verdict"] for item, result, _ in rows)
    held = sum(holds_answer(item, result) for item, result, _ in rows)
    print(f"verdicts as expected: {matched}/{len(rows)}")
    print(f"answers stating the expected fact (or declining where none is): {held}/{len(rows)}")
    home = f" --home {ctx.store.home}" if ctx.origin("home") == "argument" else ""
    print(f'\nnext: crag ask "your question"{home}   (or: crag chat{home}, langgraph dev)')
    return 0
