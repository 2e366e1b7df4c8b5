"""One inter-process lock for the places that need one: the ingest writer, the one-time
assembly of the local model file, and a conversation's thread (one turn at a time)."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path


class LockBusy(Exception):
    """Another process holds the lock; `holder` is its pid as it wrote it."""

    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"{path} is held by pid {holder}")
        self.holder = holder


@contextlib.contextmanager
def exclusive(path: Path, *, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if absent), writing our pid into it.

    `wait=False` raises `LockBusy` at once when another process holds it. Opening
    the file can raise `OSError` (read-only folder): callers say what to do then.
    Without fcntl (Windows) nothing is locked and callers rely on atomic renames.
    """
    with open(path, "a+") as fh:
        try:
            import fcntl  # POSIX only
        except ImportError:  # pragma: no cover - not POSIX
            yield
            return
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            fh.seek(0)
            raise LockBusy(path, fh.read().strip() or "?") from exc
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        try:
            yield
        finally:
            fh.seek(0)
            fh.truncate()
            fcntl.flock(fh, fcntl.LOCK_UN)
