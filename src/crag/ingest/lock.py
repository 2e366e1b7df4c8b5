"""One writer per store: the lock an ingest holds on its CRAG_HOME (or, for a Chroma
server, on that server's URL, kept in this home)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from crag.context import Context
from crag.errors import IngestError, StoreError
from crag.filelock import LockBusy, exclusive
from crag.ingest.loaders import sha256_hex
from crag.retrieval.clients import check_home
from crag.retrieval.store_errors import store_error


@contextlib.contextmanager
def home_lock(ctx: Context) -> Iterator[None]:
    """One writer per store: two on an embedded store stall on SQLite locks for minutes,
    and two on a server both embed everything. (A server's lock lives in this CRAG_HOME,
    so it holds between ingests from this machine and home.)"""
    check_home(ctx)
    name = "ingest.lock"
    where: str | Path = ctx.store.home
    if ctx.store.chroma_url:
        name = f"ingest-{sha256_hex(ctx.store.chroma_url)[:12]}.lock"
        where = ctx.store.chroma_url
    with contextlib.ExitStack() as stack:
        try:
            ctx.store.home.mkdir(parents=True, exist_ok=True)
            stack.enter_context(exclusive(ctx.store.home / name, wait=False))
        except LockBusy as busy:
            raise IngestError(
                f"another `crag ingest` (pid {busy.holder}) is writing to {where}; "
                "wait for it to finish"
            ) from busy
        except OSError as exc:  # a read-only or full disk, a file in the way
            raise store_error(exc, str(ctx.store.home)) or StoreError(
                f"{ctx.store.home}: {exc}"
            ) from exc
        yield
