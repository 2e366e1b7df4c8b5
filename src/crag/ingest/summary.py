"""What an ingest did, file by file and in total: what `crag ingest --json` prints and
the ingest graph returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from crag.context import DEFAULT_TENANT
from crag.errors import CragError

Status = Literal["indexed", "updated", "resumed", "unchanged", "failed"]


@dataclass
class FileReport:
    source: str
    status: Status
    reason: str = ""
    pages: int = 0
    chunks: int = 0  # chunks of the file's current version
    embedded: int = 0  # chunks sent to the embedding model
    reused: int = 0  # chunks whose vector was already in the collection
    deleted: int = 0  # chunks of older or partial versions removed
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)


@dataclass
class IngestSummary:
    root: str
    collection: str
    tenant: str = DEFAULT_TENANT
    files: list[FileReport] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    chunks_pruned: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0  # wall time inside the embedding model
    error: str | None = None  # a fatal error that stopped the run
    interrupted: bool = False
    not_processed: int = 0  # files left when the run stopped early

    def _count(self, *statuses: str) -> int:
        return sum(1 for f in self.files if f.status in statuses)

    @property
    def files_ok(self) -> int:
        return self._count("indexed", "updated", "resumed")

    @property
    def files_unchanged(self) -> int:
        return self._count("unchanged")

    @property
    def files_failed(self) -> int:
        return self._count("failed")

    @property
    def pages(self) -> int:
        return sum(f.pages for f in self.files)

    @property
    def chunks_written(self) -> int:
        return sum(f.embedded + f.reused for f in self.files)

    @property
    def chunks_embedded(self) -> int:
        return sum(f.embedded for f in self.files)

    @property
    def chunks_deleted(self) -> int:
        return sum(f.deleted for f in self.files) + self.chunks_pruned

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if self.error or self.files_failed else 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly: what `crag ingest --json` prints and the ingest graph returns."""
        return {
            "root": self.root,
            "collection": self.collection,
            "tenant": self.tenant,
            "files_ok": self.files_ok,
            "files_unchanged": self.files_unchanged,
            "files_failed": self.files_failed,
            "pages": self.pages,
            "chunks_written": self.chunks_written,
            "chunks_embedded": self.chunks_embedded,
            "chunks_deleted": self.chunks_deleted,
            "pruned": list(self.pruned),
            "seconds": round(self.seconds, 3),
            "embed_seconds": round(self.embed_seconds, 3),
            "failures": [{"source": f.source, "reason": f.reason} for f in self.files if f.reason],
            "error": self.error,
            "interrupted": self.interrupted,
            "not_processed": self.not_processed,
            "exit_code": self.exit_code,
            "files": [asdict(f) for f in self.files],
        }


def describe_error(exc: BaseException) -> str:
    """An error as a file's report gives it: crag's own message, or the exception's type
    and message."""
    msg = " ".join(str(exc).split())
    if isinstance(exc, CragError) and msg:  # its message names the cause and the fix
        return msg
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
