"""`crag ingest PATH`: index a folder of PDFs (and .md/.txt) into Chroma.

Exit codes: 0 all files indexed or unchanged; 1 some files failed, nothing to
ingest, or the run stopped on an embedder/store error; 2 usage error (missing
path, bad option); 130 interrupted (re-run to finish).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any


def _positive(minimum: int) -> Any:
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {raw!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `ingest`. Options default to SUPPRESS so they never clobber
    same-named options of the parent parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "ingest",
        help="index a folder of PDFs (and .md/.txt) into the library",
        description=(
            "Walk PATH (a folder, recursively, or one file) for .pdf, .md, .markdown and "
            ".txt files, split them into page-cited chunks and index them in Chroma. "
            "Re-runs are incremental: unchanged files cost nothing, changed files are "
            "replaced, an interrupted run resumes."
        ),
    )
    parser.add_argument("path", type=Path, help="folder or file to ingest")
    suppress = argparse.SUPPRESS
    parser.add_argument(
        "--collection", default=suppress, help="collection to write (default: books)"
    )
    parser.add_argument(
        "--home", type=Path, default=suppress, help="data folder (default: .crag, $CRAG_HOME)"
    )
    parser.add_argument(
        "--prune",
        action="store_true",
        default=suppress,
        help="remove chunks of files that are no longer under PATH",
    )
    parser.add_argument(
        "--chunk-size",
        type=_positive(100),
        default=suppress,
        help="target chunk size in characters (default 900)",
    )
    parser.add_argument(
        "--chunk-overlap",
        type=_positive(0),
        default=suppress,
        help="overlap in characters (default 150)",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", default=suppress, help="no progress display"
    )
    parser.add_argument(
        "--json", action="store_true", default=suppress, help="print the summary as JSON"
    )
    parser.set_defaults(func=run)
    return parser


def _error(message: str) -> None:
    print(f"crag ingest: error: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Run the command; returns the exit code."""
    from crag.context import Context
    from crag.ingest.indexer import IngestError, Ingestor
    from crag.ingest.progress import Progress, format_summary
    from crag.providers.errors import ProviderError
    from crag.store import StoreError, check_collection_name

    try:
        ctx = Context().with_overrides(
            home=getattr(args, "home", None),
            collection=getattr(args, "collection", None),
            chunk_size=getattr(args, "chunk_size", None),
            chunk_overlap=getattr(args, "chunk_overlap", None),
        )
        check_collection_name(ctx.collection)
    except (ValueError, StoreError) as exc:
        _error(str(exc))
        return 2

    # pypdf logs every recoverable oddity of a PDF; the loader reports what matters.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    as_json = bool(getattr(args, "json", False))
    progress = Progress(quiet=bool(getattr(args, "quiet", False)))
    ingestor = Ingestor(ctx, prune=bool(getattr(args, "prune", False)), on_event=progress)
    try:
        summary = ingestor.run(args.path)
    except IngestError as exc:
        _error(str(exc))
        return exc.exit_code
    except (StoreError, ProviderError) as exc:
        _error(str(exc))
        return 1
    except KeyboardInterrupt:
        summary = ingestor.summary
        summary.interrupted = True
    result = summary.to_dict()
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        print(format_summary(result))
    return summary.exit_code
