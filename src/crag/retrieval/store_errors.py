"""Chroma's failures as one line each: what went wrong and how to fix it.

Every call into Chroma runs inside `guard`, which turns its exceptions (and a native
panic) into a `StoreError` naming the cause: a full disk, a read-only folder, a
damaged database, a lost server.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crag.errors import CragError, DamagedStore, StoreError

if TYPE_CHECKING:
    pass


def rebuild_hint(collection: str | None) -> str:
    extra = f" --collection {collection}" if collection and collection != "books" else ""
    return f"`crag ingest FOLDER{extra} --rebuild`"


def store_error(exc: BaseException, where: str, collection: str | None = None) -> StoreError | None:
    """`exc` (raised by Chroma, SQLite, the file system or the HTTP client while using the
    store at `where`) as a StoreError naming cause and fix; None if it is not a store failure
    (a bug of crag's, which should keep its traceback)."""
    if isinstance(exc, StoreError):
        return exc
    name = type(exc).__name__
    text = " ".join(str(exc).split()) or name
    low = text.lower()
    code = getattr(exc, "errno", None)
    if code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) or any(
        s in low for s in ("disk is full", "no space left", "file too large", "quota exceeded")
    ):
        return StoreError(
            f"no room to write the Chroma store at {where} ({text}): free some disk space "
            "and run the command again"
        )
    if code in (errno.EACCES, errno.EPERM, errno.EROFS) or any(
        s in low for s in ("readonly database", "read-only file system", "permission denied")
    ):
        return StoreError(
            f"cannot write to {where} ({text}): crag needs write access to its store, even to "
            "ask (Chroma writes there); make the folder writable, or copy it and point "
            "--home / CRAG_HOME at the copy"
        )
    if code == errno.ENOTDIR or code == errno.EEXIST:
        return StoreError(f"{where}: {text}; point --home / CRAG_HOME at a folder")
    if any(
        s in low
        for s in ("file is not a database", "malformed", "database disk image", "not a database")
    ):
        return DamagedStore(
            f"the Chroma database {where}/chroma.sqlite3 is damaged ({text}): rebuild the "
            f"library with {rebuild_hint(collection)} (the damaged store is moved aside)",
            part="database",
            collection=collection,
        )
    if "dimension" in low:
        what = f"collection {collection!r}" if collection else "the collection"
        return StoreError(
            f"{what} was built with another embedding model ({text}): use the embeddings "
            f"it was built with, or rebuild it with these: {rebuild_hint(collection)}"
        )
    if "hnsw" in low or "pickle" in low:
        what = f"collection {collection!r}" if collection else "a collection"
        return DamagedStore(
            f"the vector index of {what} in {where} is damaged ({text}): rebuild it with "
            f"{rebuild_hint(collection)}",
            part="index",
            collection=collection,
        )
    module = type(exc).__module__ or ""
    if (
        module.startswith("httpx")
        or isinstance(exc, ConnectionError)
        or "could not connect" in low
        or "connection refused" in low
    ):
        return StoreError(
            f"lost the Chroma server at {where} ({text}): check that it is running (`chroma "
            "run --path DIR --port N`) and run the command again"
        )
    if (
        module.startswith("chromadb")
        or isinstance(exc, OSError | sqlite3.Error)
        or name == "PanicException"  # a panic in Chroma's native code
    ):
        # Chroma often reports a failed write without its cause ("Failed to apply logs"):
        # look at the folder for one.
        cause = _write_trouble(where) or (
            "check that its disk has room and its folder is writable, then run the command "
            f"again ({rebuild_hint(collection)} rebuilds a damaged collection)"
        )
        return StoreError(f"the Chroma store at {where} failed ({name}: {text}): {cause}")
    return None


#: Less free space than this on the store's disk is reported as the likely cause of a failure.
_LOW_SPACE = 64 << 20


def _write_trouble(where: str) -> str | None:
    """Why writing to the embedded store at `where` may have failed (full disk, file size
    limit, read-only folder), with the fix; None if nothing is visibly wrong (or a server)."""
    folder = Path(where)
    if not folder.is_dir():
        return None
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return None
    if free < _LOW_SPACE:
        return f"its disk has only {free >> 20} MB free; free some space and run the command again"
    if not os.access(folder, os.W_OK):
        return "its folder is read-only; make it writable, or copy it and point --home at the copy"
    try:
        import resource  # POSIX only
    except ImportError:  # pragma: no cover - Windows
        return None
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY:
        largest = max((p.stat().st_size for p in folder.rglob("*") if p.is_file()), default=0)
        if largest + (8 << 20) > limit:
            return (
                f"files may not grow past {limit} bytes here (`ulimit -f`) and the store's "
                f"largest has {largest}; raise the limit and run the command again"
            )
    return None


def location(target: Any) -> str:
    """Where a client or collection keeps its data: a folder or a server's host:port."""
    client = getattr(target, "_client", target)
    try:
        settings = client.get_settings()
        if settings.is_persistent:
            return str(settings.persist_directory)
        return f"{settings.chroma_server_host}:{settings.chroma_server_http_port}"
    except Exception:
        return "the Chroma store"


@contextlib.contextmanager
def guard(target: Any, collection: str | None = None) -> Iterator[None]:
    """Chroma calls inside the block fail as a StoreError (see `store_error`)."""
    try:
        yield
    except CragError:
        raise
    except BaseException as exc:  # a PanicException (Chroma's native code) is no Exception
        if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
            raise
        problem = store_error(exc, location(target), collection)
        if problem is None:
            raise
        raise problem from exc
