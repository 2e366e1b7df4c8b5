"""Walk PATH (a folder, recursively, or one file) for .pdf, .md, .markdown and .txt
files, split them into page-cited chunks and index them in Chroma. Re-runs are
incremental: unchanged files cost nothing, changed files are replaced, an
interrupted run resumes. `--rebuild` drops the collection and ingests everything
again: the repair for a damaged index or store.

Exit codes: 0 all files indexed or unchanged; 1 some files failed, nothing to
ingest, or the run stopped on an embedder/store error; 2 usage error (missing
path, bad option); 130 interrupted (re-run to finish).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from crag.cli.options import STORE_FLAGS, add_context_flags, context_from_args
from crag.errors import IngestError, ProviderError, StoreError
from crag.ingest.progress import Progress, format_summary
from crag.text import printable

if TYPE_CHECKING:
    from crag.ingest.indexer import Event

NAME = "ingest"
HELP = "index a folder of PDFs (and .md/.txt) into the library"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, help="folder or file to ingest")
    parser.add_argument(
        "--prune", action="store_true", help="remove chunks of files that are no longer under PATH"
    )
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="drop the collection and ingest PATH again (repairs a damaged index); refused "
        "while the collection holds other tenants' or folders' files, unless --force",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="with --rebuild: drop what other tenants and folders hold too",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    parser.add_argument(
        "--json",
        action="store_true",
        help='print the summary as JSON ({"error", "exit_code"} if the run cannot start)',
    )
    add_context_flags(parser, STORE_FLAGS)


def _error(message: str, args: argparse.Namespace | None = None) -> None:
    """One line on stderr; with -v, first the traceback of the exception being handled."""
    if args is not None and getattr(args, "verbose", False) and sys.exc_info()[0] is not None:
        traceback.print_exc()
    print(f"crag ingest: error: {printable(message)}", file=sys.stderr)


def _failed(message: str, exit_code: int, args: argparse.Namespace) -> int:
    """A run that could not start: its error line, and with --json an object saying so."""
    _error(message, args)
    if args.json:
        print(json.dumps({"error": message, "exit_code": exit_code}, indent=2))
    return exit_code


def _with_notes(progress: Progress, quiet: bool) -> Callable[[Event], None]:
    """The progress display, plus the lines a rebuild adds."""

    def on_event(event: Event) -> None:
        kind = event.get("event")
        if kind == "set_aside":
            progress.message(
                f"warning: the store's database was unreadable; moved {event['store']} to "
                f"{event['to']} (ingest its other collections again)"
            )
        elif kind == "rebuild" and not quiet:
            dropped = "dropped the old one, " if event["dropped"] else ""
            progress.message(f"rebuilding {event['collection']!r}: {dropped}ingesting every file")
        progress(event)

    return on_event


def run(args: argparse.Namespace) -> int:
    from crag.ingest.indexer import Ingestor  # Chroma and the embeddings: not for --help
    from crag.models.embeddings import embeddings_ready
    from crag.retrieval.clients import check_collection_name, check_home

    try:
        ctx = context_from_args(args)
        check_collection_name(ctx.store.collection)
        if not ctx.store.chroma_url:
            check_home(ctx)
        embeddings_ready(ctx)  # a missing key is the run's, not the first file's
    except (ValueError, StoreError, ProviderError) as exc:
        return _failed(str(exc), 2, args)

    # pypdf logs every recoverable oddity of a PDF; the loader reports what matters.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    ingestor = Ingestor(
        ctx,
        prune=args.prune,
        rebuild=args.rebuild,
        force=args.force,
        on_event=_with_notes(Progress(quiet=args.quiet), args.quiet),
    )
    try:
        summary = ingestor.run(args.path)
    except IngestError as exc:
        return _failed(str(exc), exc.exit_code, args)
    except (StoreError, ProviderError) as exc:
        return _failed(str(exc), 1, args)
    except KeyboardInterrupt:
        summary = ingestor.summary
        summary.interrupted = True
    result = summary.to_dict()
    print(json.dumps(result, indent=2) if args.json else printable(format_summary(result)))
    if summary.error:
        _error(summary.error)
    return summary.exit_code
