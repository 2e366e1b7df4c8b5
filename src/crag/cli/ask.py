"""`crag ask QUESTION`: run the graph, show progress, verdict, scores, answer, sources."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

from crag.api import ask, summary
from crag.cli.options import add_context_flags, context_from_args
from crag.text import printable

NAME = "ask"
HELP = "answer a question from the library (and the web)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("question", help="the question, in quotes")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_context_flags(parser)


def progress(node: str, update: dict[str, Any]) -> None:
    step = (update.get("path") or [{}])[-1]
    seconds = step.get("seconds", 0.0)
    detail = printable(str(step.get("detail", "")))
    print(f"  {node:<10} {seconds:6.2f}s  {detail}", file=sys.stderr)


def render(result: dict[str, Any]) -> str:
    lines = [f"verdict: {result['verdict']}  (grader: {result['grader']})", "retrieved:"]
    for i, doc in enumerate(result["documents"], start=1):
        where = f"{doc['source']}" + (f", p. {doc['page']}" if doc.get("page") else "")
        lines.append(f"  {i}. score {doc.get('score', 0):.2f}  {where}")
    if result["web_query"]:
        lines.append(f"web query: {result['web_query']}")
    if result["web_error"]:
        lines.append(f"external source failed: {result['web_error']}")
    lines += ["", textwrap.fill(result["answer"], width=100), ""]
    if result["citations"]:
        lines.append("sources:")
        for c in result["citations"]:
            where = c.get("url") or (
                f"{c['source']}, page {c['page']}" if c.get("page") else c["source"]
            )
            lines.append(f"  [{c['n']}] {where}")
    total = sum(result["timings"].values())
    lines.append(f"path: {' -> '.join(result['path'])}  ({total:.1f}s)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    ctx = context_from_args(args)
    show = not (args.quiet or args.json)
    if show:
        print(f"question: {printable(args.question)}", file=sys.stderr)
    state = ask(args.question, context=ctx, on_step=progress if show else None)
    result = summary(state)
    # JSON escapes control characters itself; text goes through `printable`
    print(
        json.dumps(result, indent=2, ensure_ascii=False) if args.json else printable(render(result))
    )
    return 0
