"""`crag ask QUESTION`: run the graph, show its progress, then the answer and its sources,
the verdict and the confidence (`--details`: what was retrieved, scored and searched)."""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from typing import Any

from crag.cli.options import add_context_flags, check_before_asking, context_from_args
from crag.text import printable

NAME = "ask"
HELP = "answer a question from the library (and the web)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("question", help="the question, in quotes")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "-v",
        "--details",
        action="store_true",
        help="also every retrieved chunk's score, the parts, searches and path",
    )
    parser.add_argument(
        "--thread", default=None, help="continue this conversation (see `crag chat`)"
    )
    add_context_flags(parser)


def progress(node: str, update: dict[str, Any]) -> None:
    step = (update.get("path") or [{}])[-1]
    seconds = step.get("seconds", 0.0)
    detail = printable(str(step.get("detail", "")))
    print(f"  {node:<12} {seconds:6.2f}s  {detail}", file=sys.stderr)  # cache_lookup fits


def where(doc: dict[str, Any], page_word: str = "page") -> str:
    """A source as a reader cites it, on one line whatever its name holds."""
    name = doc.get("url") or doc["source"]
    page = f", {page_word} {doc['page']}" if doc.get("page") and not doc.get("url") else ""
    query = f" (SQL: {doc['query']})" if doc.get("query") else ""
    return printable(f"{name}{page}{query}", one_line=True)


def sources(result: dict[str, Any]) -> list[str]:
    """The answer's numbered sources, as printed under it."""
    if not result["citations"]:
        return []
    return ["sources:", *(f"  [{c['n']}] {where(c)}" for c in result["citations"])]


def signals(doc: dict[str, Any]) -> str:
    """A document's confidence and its signals, when refinement rated it."""
    if "confidence" not in doc:
        return ""
    dated = doc.get("date") or "undated"
    return (
        f"  conf {doc['confidence']:.2f} (complete {doc.get('completeness', 0):.2f}, "
        f"recent {doc.get('recency', 0):.2f} {dated}, "
        f"authority {doc.get('authority', 0):.2f} {doc.get('kind', '?')})"
    )


def render(result: dict[str, Any], details: bool = False) -> str:
    """The answer and its sources first, then the verdict and the confidence; what was
    retrieved, scored and searched, and the path taken, with `details`."""
    notes = sources(result)
    for conflict in result.get("conflicts") or []:
        said = "; ".join(f"{v['source']}: {v['value']}" for v in conflict["values"])
        notes.append(f"sources disagree ({conflict['by']}): {said}")
    if result["web_error"]:
        notes.append(f"external source failed: {result['web_error']}")
    if result.get("answered") and result.get("support") == "partial":
        missing = ", ".join(result.get("unsupported") or [])
        notes.append(
            f"partly answered: the sources found do not state {missing}"
            if missing
            else "partly answered: sentences no source states were left out"
        )
    how = f"verdict: {result['verdict']}"
    # the probability that this answer, or this decline, is right
    said = "confidence" if result["answered"] else "confidence in declining"
    how += f", {said} {result.get('confidence', 0):.2f}"
    if result.get("cached"):
        how += " (an answer cached by an earlier run)"
    # an address or a hyphenated name is never cut in two: it is copied whole
    answer = textwrap.fill(result["answer"], 100, break_on_hyphens=False, break_long_words=False)
    lines = [answer, ""]
    lines += [*notes, ""] if notes else []
    lines.append(how)
    if details:
        lines += _details(result)
    return "\n".join(lines)


def _details(result: dict[str, Any]) -> list[str]:
    lines = []
    if not result.get("cached"):
        lines.append(f"grader: {result['grader']}, route: {result['route']}")
    for part in result["parts"]:
        lines.append(f"  part: {part['text']}  {'covered' if part['covered'] else 'not covered'}")
    if result["documents"]:
        lines.append("retrieved:")
    for i, doc in enumerate(result["documents"], start=1):
        lines.append(f"  {i}. score {doc.get('score', 0):.2f}  {where(doc, 'p.')}{signals(doc)}")
    if result["web_query"]:
        lines.append(f"web query: {result['web_query']}")
    if result["searched"]:
        lines.append(f"searched: {'; '.join(result['searched'])}")
    for i, doc in enumerate(result.get("web_documents") or [], start=1):
        lines.append(f"  w{i}. score {doc.get('score', 0):.2f}  {where(doc)}{signals(doc)}")
    total = sum(result["timings"].values())
    lines.append(f"path: {' -> '.join(result['path'])}  ({total:.1f}s)")
    return lines


def as_json(result: dict[str, Any]) -> str:
    """One JSON object; C1 control characters escaped too (json escapes only C0)."""
    text = json.dumps(result, indent=2, ensure_ascii=False)
    return re.sub(r"[\x7f-\x9f]", lambda m: f"\\u{ord(m.group()):04x}", text)


def streamed(piece: str) -> None:
    """The answer's words on stderr as the model writes them (stdout gets the result)."""
    sys.stderr.write(printable(piece))
    sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    from crag.api import ask, summary  # LangGraph and the models: not for --help
    from crag.models.chat import EXTRACTIVE
    from crag.state import clean_question

    ctx = context_from_args(args)
    question = clean_question(args.question, ctx.retrieval.max_question_chars)  # before echoing
    check_before_asking(ctx)
    show = not (args.quiet or args.json)
    if show:
        print(f"question: {printable(question)}", file=sys.stderr)
    state = ask(
        question,
        context=ctx,
        thread_id=args.thread,
        on_step=progress if show else None,
        on_token=streamed if show and ctx.models.chat_model != EXTRACTIVE else None,
    )
    result = summary(state)
    print(as_json(result) if args.json else printable(render(result, args.details)))
    return 0
