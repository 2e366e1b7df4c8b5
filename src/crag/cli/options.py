"""Command-line flags that map onto Context fields, shared by every subcommand."""

from __future__ import annotations

import argparse
from pathlib import Path

from crag.context import Context

# flag -> (Context field, type, help); None defaults mean "leave the Context value".
_FLAGS: list[tuple[str, str, type, str]] = [
    ("--home", "home", Path, "data folder (default: $CRAG_HOME or .crag)"),
    ("--collection", "collection", str, "library collection (default: books)"),
    ("--external", "external", str, "external source: local, tavily or none"),
    ("--external-collection", "external_collection", str, "collection used by --external local"),
    ("--k", "k", int, "chunks retrieved per question"),
    ("--upper", "upper", float, "verdict 'correct' if any score >= upper"),
    ("--lower", "lower", float, "verdict 'incorrect' if all scores < lower"),
    ("--grader", "grader", str, "auto, features, cascade, similarity, judge or trained"),
    ("--chat-model", "chat_model", str, "local, openai:<model> or extractive"),
    ("--judge-model", "judge_model", str, "chat model of the LLM judge (default: chat model)"),
    ("--embeddings", "embeddings", str, "local or openai:<model>"),
    ("--strip-threshold", "strip_threshold", float, "strips scoring below this are dropped"),
    ("--max-strips", "max_strips", int, "at most this many strips kept"),
    ("--web-k", "web_k", int, "external results per search"),
    ("--timeout", "timeout_s", float, "timeout of each external call (s)"),
]


def add_context_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("configuration (overrides CRAG_* env vars)")
    for flag, dest, kind, text in _FLAGS:
        group.add_argument(flag, dest=dest, type=kind, default=None, help=text)
    group.add_argument(
        "--no-refine",
        dest="refine",
        action="store_const",
        const=False,
        default=None,
        help="skip knowledge refinement (ablation)",
    )
    group.add_argument(
        "--no-llm",
        dest="no_llm",
        action="store_true",
        help="no language model at all: feature grading and extractive answers",
    )


def context_from_args(args: argparse.Namespace) -> Context:
    """Context from the environment, overridden by the flags that were given."""
    overrides = {dest: getattr(args, dest, None) for _, dest, _, _ in _FLAGS}
    overrides["refine"] = getattr(args, "refine", None)
    if getattr(args, "no_llm", False):
        overrides["chat_model"] = "extractive"
        if overrides.get("grader") in (None, "auto", "cascade", "judge"):
            overrides["grader"] = "features"  # the grader needs no LLM either
    return Context().with_overrides(**overrides)
