"""Walk PATH (a folder, recursively, or one file) for .pdf, .md, .markdown and .txt
files, split them into page-cited chunks and index them in Chroma. Re-runs are
incremental: unchanged files cost nothing, changed files are replaced, an
interrupted run resumes.

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

from crag.cli.options import STORE_FIELDS, add_context_flags, context_from_args
from crag.errors import IngestError, ProviderError, StoreError
from crag.ingest.indexer import Ingestor
from crag.ingest.progress import Progress, format_summary
from crag.retrieval.library import check_collection_name
from crag.text import printable

NAME = "ingest"
HELP = "index a folder of PDFs (and .md/.txt) into the library"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, help="folder or file to ingest")
    parser.add_argument(
        "--prune", action="store_true", help="remove chunks of files that are no longer under PATH"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_context_flags(parser, STORE_FIELDS)


def _error(message: str) -> None:
    print(f"crag ingest: error: {printable(message)}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    try:
        ctx = context_from_args(args)
        check_collection_name(ctx.collection)
    except (ValueError, StoreError) as exc:
        _error(str(exc))
        return 2

    # pypdf logs every recoverable oddity of a PDF; the loader reports what matters.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    ingestor = Ingestor(ctx, prune=args.prune, on_event=Progress(quiet=args.quiet))
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
    print(json.dumps(result, indent=2) if args.json else printable(format_summary(result)))
    return summary.exit_code
