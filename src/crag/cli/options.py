"""Command-line flags that map onto Context fields, and the argument types every
subcommand shares."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from crag.context import Context
from crag.grading.registry import GRADERS
from crag.graph import checked
from crag.retrieval.external import SOURCES


def positive_int(minimum: int = 1) -> Callable[[str], int]:
    """An argparse type: an integer of at least `minimum`."""

    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {raw!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


# flag -> (Context field, type, help); None defaults mean "leave the Context value".
_FLAGS: list[tuple[str, str, Callable[[str], object], str]] = [
    ("--home", "home", Path, "data folder (default: $CRAG_HOME or .crag)"),
    ("--chroma-url", "chroma_url", str, "a Chroma server (http://host:port) instead of --home"),
    ("--collection", "collection", str, "library collection (default: books)"),
    ("--tenant", "tenant", str, "whose library: chunks, cache and pairs are per tenant"),
    ("--external", "external", str, "external source: " + SOURCES.describe()),
    ("--external-collection", "external_collection", str, "collection used by --external local"),
    ("--k", "k", positive_int(), "chunks retrieved per question"),
    ("--upper", "upper", float, "verdict 'correct' if any score >= upper"),
    ("--lower", "lower", float, "verdict 'incorrect' if all scores < lower"),
    ("--grader", "grader", str, "grader: " + GRADERS.describe()),
    ("--chat-model", "chat_model", str, "local, openai:<model> or extractive"),
    ("--judge-model", "judge_model", str, "chat model of the LLM judge (default: chat model)"),
    ("--embeddings", "embeddings", str, "local or openai:<model>"),
    ("--strip-threshold", "strip_threshold", float, "strips scoring below this are dropped"),
    ("--max-strips", "max_strips", positive_int(), "at most this many strips kept"),
    ("--web-k", "web_k", positive_int(), "external results per search"),
    ("--timeout", "timeout_s", float, "timeout of each external call (s)"),
    ("--cache-threshold", "cache_threshold", float, "similarity a cached question must reach"),
    ("--cache-size", "cache_size", positive_int(), "cached answers kept per tenant"),
    (
        "--cache-min-confidence",
        "cache_min_confidence",
        float,
        "answers with a lower confidence are not cached",
    ),
    ("--chunk-size", "chunk_size", positive_int(100), "target chunk size in characters"),
    ("--chunk-overlap", "chunk_overlap", positive_int(0), "chunk overlap in characters"),
]
#: The flags a question-answering command takes (ingest takes the store's only).
RUN_FIELDS = tuple(dest for _, dest, _, _ in _FLAGS if not dest.startswith("chunk_"))
STORE_FIELDS = (
    "home",
    "chroma_url",
    "collection",
    "tenant",
    "embeddings",
    "chunk_size",
    "chunk_overlap",
)


def add_context_flags(parser: argparse.ArgumentParser, fields: Sequence[str] = RUN_FIELDS) -> None:
    group = parser.add_argument_group("configuration (overrides CRAG_* env vars)")
    choices = {"grader": GRADERS.names(), "external": SOURCES.names()}
    for flag, dest, kind, text in _FLAGS:
        if dest in fields:
            group.add_argument(
                flag, dest=dest, type=kind, default=None, choices=choices.get(dest), help=text
            )
    if fields is not RUN_FIELDS:
        return
    group.add_argument(
        "--no-refine",
        dest="refine",
        action="store_const",
        const=False,
        default=None,
        help="skip knowledge refinement (ablation)",
    )
    group.add_argument(
        "--no-verify",
        dest="verify",
        action="store_const",
        const=False,
        default=None,
        help="do not check answers against the question's years, versions and names",
    )
    group.add_argument(
        "--no-cache",
        dest="cache",
        action="store_const",
        const=False,
        default=None,
        help="answer every question afresh, and cache nothing",
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
    overrides["verify"] = getattr(args, "verify", None)
    overrides["cache"] = getattr(args, "cache", None)
    if getattr(args, "no_llm", False):
        overrides["chat_model"] = "extractive"
        if overrides.get("grader") in (None, "auto", "cascade", "judge"):
            overrides["grader"] = "features"  # the grader needs no LLM either
    return checked(Context().with_overrides(**overrides))
