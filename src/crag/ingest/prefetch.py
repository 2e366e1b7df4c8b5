"""The next PDF's text read while the current file is embedded, in a process of its own.

pypdf is pure Python: on a thread beside the embedder it would hold Python's lock,
which the embedder's batches need between model calls, and stall them; a helper
process reads the next book on the core the embedder leaves between calls. A file is
read ahead only if its bytes change the library (an unchanged file costs a hash), and
what the helper read is used only for the same bytes. Without the helper (it died, or
nothing was read ahead), the file is read in this process, as it always was.
"""

from __future__ import annotations

import multiprocessing
import signal
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from crag.ingest.chunking import Chunk, chunk_pages
from crag.ingest.loaders import (
    LoadedDocument,
    LoadError,
    kind_of,
    load_document,
    read_bytes,
    sha256_hex,
)
from crag.ingest.stored import Stored, file_version

Loaded = tuple[LoadedDocument, list[Chunk]]


def load_and_chunk(path: Path, data: bytes, chunk_size: int, chunk_overlap: int) -> Loaded:
    """A file's document and its chunks; a file that cannot be read raises LoadError."""
    doc = load_document(path, data)
    return doc, chunk_pages(doc.pages, doc.kind, chunk_size, chunk_overlap)


def _quiet_on_ctrl_c() -> None:
    """The helper leaves Ctrl-C to the ingest, which stops it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class ReadAhead:
    """At most one PDF read ahead by one helper process, started on first need."""

    def __init__(self, chunk_size: int, chunk_overlap: int) -> None:
        self.chunk_size, self.chunk_overlap = chunk_size, chunk_overlap
        self._pool: ProcessPoolExecutor | None = None
        self._ahead: tuple[Path, bytes, Future[Loaded]] | None = None

    def start(self, path: Path, stored: Stored, chunker: str) -> None:
        """Read `path` in the helper if it is a PDF and not `stored` complete as it is
        now; a file that cannot be read is left to its turn."""
        if kind_of(path) != "pdf":
            return
        try:
            data = read_bytes(path)
        except LoadError:
            return
        if stored.is_complete(file_version(sha256_hex(data), chunker)):
            return
        if self._pool is None:  # spawned: forking a process that runs model threads is unsafe
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(1, context, initializer=_quiet_on_ctrl_c)
        work = self._pool.submit(load_and_chunk, path, data, self.chunk_size, self.chunk_overlap)
        self._ahead = (path, data, work)

    def load(self, path: Path, data: bytes) -> Loaded:
        """The document and chunks of these bytes: the helper's, if it read them."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == path and ahead[1] == data:
            try:
                return ahead[2].result()
            except BrokenProcessPool:
                self._pool = None  # read here; a new helper starts on the next need
        return load_and_chunk(path, data, self.chunk_size, self.chunk_overlap)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
