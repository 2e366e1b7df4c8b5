"""What a collection holds of each file, per tenant: read from the store (`scan`: every
chunk's source and version, exact), or from what the last complete ingest left beside
the store (`chroma.ingested.json`: each file's version and chunk count).

With the second, an unchanged re-ingest says so without opening Chroma. The manifest
is trusted only while the collection's seal (`crag.retrieval.integrity`) is the one it
was written with and the index files are as sealed: every ingest that writes unseals
first, so no write outlives it, and a touched index or database sends the run the
whole way.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crag.context import Context
from crag.ingest.loaders import sha256_hex
from crag.retrieval.clients import TENANT_KEY
from crag.retrieval.integrity import intact_seal
from crag.retrieval.library import iter_records

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

_VERSION = 1
#: Chunks read per page when the store is scanned.
SCAN_PAGE = 5000


def file_version(file_hash: str, chunker: str) -> str:
    """A file's version: its content with the chunking rules that cut it."""
    return sha256_hex(f"{file_hash}\n{chunker}")[:20]


@dataclass
class Stored:
    """What the collection holds for one source: id → (version, chunks of that version)."""

    ids: dict[str, tuple[str, int]] = field(default_factory=dict)

    def version_ids(self, version: str) -> set[str]:
        return {i for i, (v, _) in self.ids.items() if v == version}

    def is_complete(self, version: str) -> bool:
        rows = [n for v, n in self.ids.values() if v == version]
        return bool(rows) and len(rows) == rows[0] and all(n == rows[0] for n in rows)

    def complete_versions(self) -> set[str]:
        return {v for v, _ in self.ids.values() if self.is_complete(v)}


def scan(collection: Collection, tenant: str) -> dict[str, Stored]:
    """Every chunk's source and version, read once per run (metadata only, paged): the
    tenant's chunks only, so that no other tenant's file is replaced or pruned."""
    stored: dict[str, Stored] = {}
    for record in iter_records(collection, page=SCAN_PAGE, where={TENANT_KEY: tenant}):
        entry = stored.setdefault(str(record.metadata.get("source", "")), Stored())
        count = record.metadata.get("chunks", 0)
        entry.ids[record.id] = (
            str(record.metadata.get("version", "")),
            count if isinstance(count, int) else 0,
        )
    return stored


def _path(ctx: Context) -> Path:
    return ctx.store.chroma_path.with_name("chroma.ingested.json")


def _database(ctx: Context) -> list[Any]:
    """The database file's size and first bytes: changed by damage, kept by reads."""
    db = ctx.store.chroma_path / "chroma.sqlite3"
    try:
        with db.open("rb") as f:
            return [db.stat().st_size, f.read(16).hex()]
    except OSError:
        return []


def _read(ctx: Context) -> dict[str, Any]:
    try:
        data = json.loads(_path(ctx).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("version") == _VERSION else {}


def trusted_manifest(ctx: Context, collection: str) -> dict[str, tuple[str, int]] | None:
    """What the last complete ingest of this collection and tenant left (source: version
    and chunk count), if nothing has written to the collection since; else None. Checked
    before any file is read, so a run the manifest cannot spare reads each file once."""
    entry = _read(ctx).get("collections", {}).get(collection, {}).get(ctx.store.tenant)
    if not isinstance(entry, dict) or entry.get("embeddings") != ctx.models.embeddings:
        return None
    if entry.get("database") != _database(ctx):
        return None
    if entry.get("seal") != intact_seal(ctx.store.chroma_path, collection):
        return None
    files = entry.get("files")
    if not isinstance(files, dict):
        return None
    try:
        return {str(s): (str(v[0]), int(v[1])) for s, v in files.items()}
    except (TypeError, ValueError, IndexError):
        return None


def write_manifest(ctx: Context, collection: str, files: dict[str, tuple[str, int]]) -> None:
    """After a complete run (sealed): what it left, for the next run to trust."""
    seal = intact_seal(ctx.store.chroma_path, collection)
    data = _read(ctx) or {"version": _VERSION}
    tenants = data.setdefault("collections", {}).setdefault(collection, {})
    if seal is None:  # nothing to vouch for it
        tenants.pop(ctx.store.tenant, None)
    else:
        tenants[ctx.store.tenant] = {
            "embeddings": ctx.models.embeddings,
            "database": _database(ctx),
            "seal": seal,
            "files": {source: [version, n] for source, (version, n) in files.items()},
        }
    path = _path(ctx)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)  # only speed is lost: the next run reads the store
