"""The expected failures of crag, in one place.

Each is a user's problem with a fix (a missing key, package, collection or
server), not a bug: the CLI prints its message on one line instead of a
traceback, and the graph records it where a run can go on without it.
"""

from __future__ import annotations


class CragError(RuntimeError):
    """Base of every expected failure; its message names the cause and the fix."""


class ProviderError(CragError):
    """A model provider cannot be built: missing package, env var, file or bad spec."""


class StoreError(CragError):
    """The store cannot be used as asked: unreachable server, missing or mismatched collection,
    full disk, read-only folder."""


class DamagedStore(StoreError):
    """Part of the embedded store is damaged: a collection's vector index (`part="index"`) or
    the whole store's database (`part="database"`). `crag ingest PATH --rebuild` repairs both."""

    def __init__(self, message: str, *, part: str = "index", collection: str | None = None) -> None:
        super().__init__(message)
        self.part = part
        self.collection = collection


class SearchError(CragError):
    """An external source failed (timeout, HTTP error, rate limit, missing index)."""


class IngestError(CragError):
    """An ingest run cannot start: bad path, nothing to ingest, store busy."""

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
