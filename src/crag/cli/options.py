"""Command-line flags that map onto Context fields, and the argument types every
subcommand shares."""

from __future__ import annotations

import argparse
import typing
from collections.abc import Callable, Sequence
from pathlib import Path

from crag.context import Context
from crag.grading.registry import GRADERS, without_llm
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
    ("--sources", "sources", str, "where the web path looks, in order (sql,external)"),
    ("--fast-gap", "fast_gap", float, "fast path: the best chunk's lead over the next"),
    ("--sql", "sql_path", Path, "a SQLite database for structured questions (read-only)"),
    ("--sql-max-rows", "sql_max_rows", positive_int(), "at most this many rows per SQL query"),
    ("--weight-relevance", "weight_relevance", float, "confidence weight of relevance"),
    ("--weight-completeness", "weight_completeness", float, "confidence weight of completeness"),
    ("--weight-recency", "weight_recency", float, "confidence weight of recency"),
    ("--weight-authority", "weight_authority", float, "confidence weight of authority"),
    (
        "--timely-recency-weight",
        "timely_recency_weight",
        float,
        "recency weight for a time-sensitive question ('latest', 'current', a year)",
    ),
    ("--half-life", "recency_half_life_days", float, "days after which recency halves"),
    ("--authority", "authority", str, "JSON object: kind or source -> 0-1 number or kind"),
    ("--dedup-threshold", "dedup_threshold", float, "embedding cosine of duplicate strips"),
    ("--conflicts", "conflicts", str, "sources that disagree: auto, rule, model or off"),
    (
        "--source-priority",
        "source_priority",
        str,
        "ambiguous path: auto, internal-first or web-first",
    ),
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
# --no-X flags that turn a Context switch off.
_SWITCHES = [
    ("--no-refine", "refine", "skip knowledge refinement (ablation)"),
    ("--no-verify", "verify", "do not check answers against the question's years, versions, names"),
    ("--no-fast-path", "fast_path", "every question takes the full corrective path"),
    ("--no-decompose", "decompose", "never split a question into parts"),
    ("--no-cache", "cache", "answer every question afresh, and cache nothing"),
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
    hints = typing.get_type_hints(Context, localns={"Path": Path})
    choices: dict[str, Sequence[str]] = {
        name: typing.get_args(hint)
        for name, hint in hints.items()
        if typing.get_origin(hint) is typing.Literal
    }
    choices |= {"grader": GRADERS.names(), "external": SOURCES.names()}
    for flag, dest, kind, text in _FLAGS:
        if dest in fields:
            group.add_argument(
                flag, dest=dest, type=kind, default=None, choices=choices.get(dest), help=text
            )
    if fields is not RUN_FIELDS:
        return
    for flag, dest, text in _SWITCHES:
        group.add_argument(
            flag, dest=dest, action="store_const", const=False, default=None, help=text
        )
    group.add_argument(
        "--no-llm",
        dest="no_llm",
        action="store_true",
        help="no language model at all: the default grader (no LLM) and extractive answers",
    )


def context_from_args(args: argparse.Namespace) -> Context:
    """Context from the environment, overridden by the flags that were given."""
    overrides = {dest: getattr(args, dest, None) for _, dest, _, _ in _FLAGS}
    overrides |= {dest: getattr(args, dest, None) for _, dest, _ in _SWITCHES}
    no_llm = getattr(args, "no_llm", False)
    if no_llm:
        overrides["chat_model"] = "extractive"
    ctx = Context().with_overrides(**overrides)
    return checked(without_llm(ctx) if no_llm else ctx)  # the grader asks no LLM either
