"""The next PDF's text read while the current file is embedded, in a process of its own.

pypdf is pure Python: on a thread beside the embedder it would hold Python's lock,
which the embedder's batches need between model calls, and stall them; a helper
process (`python -m crag.ingest.prefetch`, requests and replies pickled over its pipes)
reads the next book on the core the embedder leaves between calls. A plain child
process, not multiprocessing: that would run the caller's main script again in it.

A file is read ahead only if its bytes change the library (an unchanged file costs a
hash), and what the helper read is used only for the same bytes. Without the helper
(it could not start, or died), the file is read in this process, as it always was.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

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

log = logging.getLogger(__name__)

Loaded = tuple[LoadedDocument, list[Chunk]]


def load_and_chunk(path: Path, data: bytes, chunk_size: int, chunk_overlap: int) -> Loaded:
    """A file's document and its chunks; a file that cannot be read raises LoadError."""
    doc = load_document(path, data)
    return doc, chunk_pages(doc.pages, doc.kind, chunk_size, chunk_overlap)


class ReadAhead:
    """At most one PDF read ahead by one helper process, started on first need."""

    def __init__(self, chunk_size: int, chunk_overlap: int) -> None:
        self.chunk_size, self.chunk_overlap = chunk_size, chunk_overlap
        self._helper: subprocess.Popen[bytes] | None = None
        self._ahead: tuple[Path, bytes] | None = None  # what the helper is reading

    def start(self, path: Path, stored: Stored, chunker: str) -> None:
        """Read `path` in the helper if it is a PDF and not `stored` complete as it is
        now; a file that cannot be read is left to its turn."""
        if self._ahead is not None or kind_of(path) != "pdf":
            return
        try:
            data = read_bytes(path)
        except LoadError:
            return
        if stored.is_complete(file_version(sha256_hex(data), chunker)):
            return
        try:
            if self._helper is None:
                path_now = os.pathsep.join(p for p in sys.path if p)  # crag as found here
                self._helper = subprocess.Popen(
                    [sys.executable, "-m", __name__],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    env={**os.environ, "PYTHONPATH": path_now},
                )
            assert self._helper.stdin is not None
            self._helper.stdin.write(
                pickle.dumps((path, data, self.chunk_size, self.chunk_overlap))
            )
            self._helper.stdin.flush()
        except OSError as exc:
            self._lost(exc)
            return
        self._ahead = (path, data)

    def load(self, path: Path, data: bytes) -> Loaded:
        """The document and chunks of these bytes: the helper's, if it read them."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and self._helper is not None:
            assert self._helper.stdout is not None
            try:
                ok, result = pickle.load(self._helper.stdout)
            except (OSError, EOFError, pickle.UnpicklingError) as exc:
                self._lost(exc)
            else:
                if ahead == (path, data):
                    if ok:
                        return result
                    raise result
        return load_and_chunk(path, data, self.chunk_size, self.chunk_overlap)

    def _lost(self, exc: BaseException) -> None:
        log.debug("the read-ahead helper is gone (%s); files are read here", exc)
        self.close()

    def close(self) -> None:
        helper, self._helper, self._ahead = self._helper, None, None
        if helper is not None:
            helper.kill()
            helper.wait()
            for pipe in (helper.stdin, helper.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()


def _serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """The helper: read each request, reply with its result or its error."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the ingest's to handle
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # as `crag ingest` sets it
    while True:
        try:
            path, data, size, overlap = pickle.load(requests)
        except EOFError:  # the ingest ended (or died)
            return
        reply: tuple[bool, Any]
        try:
            reply = (True, load_and_chunk(path, data, size, overlap))
        except Exception as exc:
            reply = (False, exc)
        pickle.dump(reply, replies)
        replies.flush()


if __name__ == "__main__":
    protocol = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing printed may reach the replies
    _serve(sys.stdin.buffer, protocol)
