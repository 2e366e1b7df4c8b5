"""The configuration flags every subcommand shares: a few knobs as named flags, every
knob through `--set NAME=VALUE`, and the argument types the subcommands use."""

from __future__ import annotations

import argparse
import logging
import shlex
from collections.abc import Callable, Sequence

from crag.context import KNOBS, Context, knob_named


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


def assignment(raw: str) -> tuple[str, str]:
    """An argparse type: `NAME=VALUE` for a knob by flat or `group.field` name."""
    name, equals, value = raw.partition("=")
    if not equals:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {raw!r}")
    try:
        return knob_named(name).name, value
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: The knobs a question-answering command shows as flags: what a user reaches for.
RUN_FLAGS = (
    "home",
    "chroma_url",
    "collection",
    "tenant",
    "chat_model",
    "embeddings",
    "grader",
    "external",
    "k",
)
#: The knobs `crag ingest` shows as flags: where the library is and how it is cut.
STORE_FLAGS = (
    "home",
    "chroma_url",
    "collection",
    "tenant",
    "embeddings",
    "chunk_size",
    "chunk_overlap",
)


def where_flags(ctx: Context) -> str:
    """The flags naming the library that were given as arguments (" --home DIR"), for a
    command printed to be run again: without them it would read another home."""
    given = [
        n for n in ("home", "chroma_url", "collection", "tenant") if ctx.origin(n) == "argument"
    ]
    return "".join(f" --{n.replace('_', '-')} {shlex.quote(str(ctx.get(n)))}" for n in given)


def add_context_flags(parser: argparse.ArgumentParser, names: Sequence[str] = RUN_FLAGS) -> None:
    group = parser.add_argument_group(
        "configuration (beats CRAG_* env vars and settings.json; `crag config` lists every knob)"
    )
    for name in names:
        knob = KNOBS[name]
        group.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            default=None,
            metavar=name.split("_")[-1].upper(),
            help=knob.description.split(". ")[0].rstrip("."),
        )
    group.add_argument(
        "--set",
        dest="assignments",
        action="append",
        type=assignment,
        default=[],
        metavar="NAME=VALUE",
        help="any knob, e.g. --set upper=0.6 or --set grading.upper=0.6 (repeatable)",
    )
    if names is not RUN_FLAGS:
        return
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
        help="no language model at all: the default grader (no LLM) and extractive answers",
    )


def context_from_args(args: argparse.Namespace) -> Context:
    """Context from the environment and settings, overridden by the flags given."""
    from crag.api import checked
    from crag.grading.registry import without_llm

    flags = {*RUN_FLAGS, *STORE_FLAGS, "cache"}
    overrides = {name: getattr(args, name, None) for name in flags}
    overrides |= dict(getattr(args, "assignments", None) or [])
    no_llm = getattr(args, "no_llm", False)
    if no_llm:
        overrides["chat_model"] = "extractive"
    # built once, from the flags: a default Context first would read ./.crag's settings
    ctx = Context(**{name: value for name, value in overrides.items() if value is not None})
    return checked(without_llm(ctx) if no_llm else ctx)  # the grader asks no LLM either


def check_before_asking(ctx: Context) -> None:
    """For a command that asks the library, before its first question: the providers can
    start, the collections' names are valid, and the tenant has a library there."""
    from crag.api import check_ready
    from crag.retrieval.clients import check_collection_name
    from crag.retrieval.tenancy import check_tenant

    check_ready(ctx)
    check_collection_name(ctx.store.collection)  # a usage error, whatever the store holds
    if ctx.search.external == "local":
        check_collection_name(ctx.search.external_collection)
    check_tenant(ctx)
    if ctx.search.external == "local" and "external" in ctx.search.sources.split(","):
        _warn_without_external(ctx)


def _warn_without_external(ctx: Context) -> None:
    """One line before the first question when the external collection is missing: each
    answer the library cannot give would otherwise carry the error."""
    from crag.errors import StoreError
    from crag.retrieval.clients import get_collection, open_client

    name = ctx.search.external_collection
    try:
        get_collection(open_client(ctx), name)
    except StoreError:
        logging.getLogger("crag").warning(
            "collection %r does not exist%s: a question the library cannot answer gets no "
            "outside search (ingest a folder with --collection %s%s, or set external=none)",
            name,
            f" in {ctx.store.home}" if not ctx.store.chroma_url else "",
            name,
            where_flags(ctx),
        )
