"""What a collection holds of each file, per tenant (each chunk stored under a stable id,
with its file's provenance and its place in the file): read from the store (`scan`: every
chunk's source and version, exact), or from what the last complete ingest left beside
the store (`chroma.ingested.json`: each file's version and chunk count).

With the second, an unchanged re-ingest says so without opening Chroma. The manifest
is trusted only while the collection's seal (`crag.retrieval.integrity`) is the one it
was written with and the index files are as sealed: every ingest that writes unseals
first, so no write outlives it, and a touched index or database sends the run the
whole way.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crag.context import DEFAULT_TENANT, Context
from crag.ingest.chunking import Chunk
from crag.ingest.discovery import Discovery
from crag.ingest.loaders import LoadedDocument, LoadError, read_bytes, sha256_hex
from crag.retrieval.clients import TENANT_KEY
from crag.retrieval.integrity import intact_seal
from crag.retrieval.library import iter_records
from crag.source_kind import detect_kind

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
    #: The folder it was ingested from (absolute), where its chunks record one.
    library: str | None = None

    def version_ids(self, version: str) -> set[str]:
        return {i for i, (v, _) in self.ids.items() if v == version}

    def is_complete(self, version: str) -> bool:
        rows = [n for v, n in self.ids.values() if v == version]
        return bool(rows) and len(rows) == rows[0] and all(n == rows[0] for n in rows)

    def complete_versions(self) -> set[str]:
        return {v for v, _ in self.ids.values() if self.is_complete(v)}

    def elsewhere(self, source: str, library: str) -> Path | None:
        """The file of another folder, still there, that these chunks came from (two
        folders with a notes.md), if they came from one."""
        if self.library in (None, library):
            return None
        path = Path(str(self.library)) / source
        return path if path.is_file() else None


def gone_from(stored: dict[str, Stored], found: Discovery, library: str) -> list[str]:
    """The sources of the folder ingested that are no longer there. Not gone: a file or
    folder that could not be read (a mount or a permission may come back), files
    outside the subfolder ingested, and files of another folder (even one moved away:
    they were never under this one)."""
    unlisted = [where for where, _ in found.errors]
    if str(found.root) in unlisted:
        return []
    present = {found.source(f) for f in found.files}
    scope = f"{found.prefix}/" if found.prefix else ""
    return sorted(
        s
        for s, entry in stored.items()
        if s not in present
        and s.startswith(scope)
        and not any(s == u or s.startswith(u + "/") for u in unlisted)
        and entry.library in (None, library)
    )


def scan(collection: Collection, tenant: str) -> dict[str, Stored]:
    """Every chunk's source and version, read once per run (metadata only, paged): the
    tenant's chunks only, so that no other tenant's file is replaced or pruned."""
    stored: dict[str, Stored] = {}
    for record in iter_records(collection, page=SCAN_PAGE, where={TENANT_KEY: tenant}):
        entry = stored.setdefault(str(record.metadata.get("source", "")), Stored())
        if entry.library is None and isinstance(record.metadata.get("library"), str):
            entry.library = str(record.metadata["library"])
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


def chunk_id(source: str, version: str, index: int, tenant: str = DEFAULT_TENANT) -> str:
    """Stable: an unchanged file chunked the same way gets the same ids. Another tenant's
    copy of the same file gets ids of its own (the default tenant keeps the ids it had
    before tenants existed)."""
    owner = "" if tenant == DEFAULT_TENANT else tenant + "\n"
    key = sha256_hex(owner + source + "\n" + version)[:24]
    return f"{key}-{index:05d}"


def provenance(doc: LoadedDocument, file: Path, source: str) -> dict[str, str]:
    """When the document was written and what kind of source it is, for the confidence
    signals. The file's modification time dates it only when nothing else does."""
    meta: dict[str, str] = {}
    when, dated_by = doc.date, doc.dated_by
    if when is None:
        with contextlib.suppress(OSError, ValueError, OverflowError):
            when, dated_by = date.fromtimestamp(file.stat().st_mtime), "file"
    if when is not None:
        meta["date"], meta["dated_by"] = when.isoformat(), dated_by
    if kind := detect_kind(source, doc.url):
        meta["source_kind"] = kind  # "kind" is the file's type (pdf, markdown, text)
    return meta


def chunk_metadata(base: dict[str, Any], chunk: Chunk) -> dict[str, Any]:
    """A chunk's metadata: its file's, with where in the file it stands."""
    meta = dict(base)
    meta["chunk"] = chunk.index
    meta["content_hash"] = sha256_hex(chunk.text)
    if chunk.page is not None:
        meta["page"] = chunk.page
        meta["page_number"] = chunk.page_number
    return meta


def unchanged(
    ctx: Context, collection_name: str, found: Discovery, chunker: str
) -> dict[str, int] | None:
    """Each found file's chunk count, if every one is the version the last complete
    ingest left (`trusted_manifest`); None at the first file that is not."""
    left = trusted_manifest(ctx, collection_name)
    if left is None:
        return None
    chunks = {}
    for file in found.files:
        source = found.source(file)
        try:
            version = file_version(sha256_hex(read_bytes(file)), chunker)
        except LoadError:
            return None
        if left.get(source, ("", 0))[0] != version:
            return None
        chunks[source] = left[source][1]
    return chunks
