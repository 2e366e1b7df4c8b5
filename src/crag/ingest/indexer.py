"""Incremental, crash-safe indexing of a folder into a Chroma collection.

The index describes itself: every chunk carries its file's `version` (the file's and
the chunking rules' hash) and the number of chunks of that version, so a file whose
version is complete is skipped after its hash. A changed file's new chunks are written
before its old ones are deleted, under ids derived from (source, version, index): a
crash leaves at most a partial version, which the next run completes. A run reads,
replaces and prunes only its tenant's chunks; `rebuild` drops the collection first
(moving aside a store whose database is unreadable). A run that ends normally seals
the collection's index files (`integrity.seal`), so later damage is caught before
Chroma loads them.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crag.context import Context
from crag.errors import IngestError, StoreError
from crag.ingest.chunking import Chunk, chunker_signature
from crag.ingest.discovery import Discovery, discover
from crag.ingest.loaders import LoadError, read_bytes, sha256_hex
from crag.ingest.lock import home_lock
from crag.ingest.prefetch import ReadAhead
from crag.ingest.rebuild import dropped
from crag.ingest.stored import (
    Stored,
    chunk_id,
    chunk_metadata,
    file_version,
    gone_from,
    provenance,
    scan,
    unchanged,
    write_manifest,
)
from crag.ingest.summary import FileReport, IngestSummary, describe_error
from crag.retrieval.clients import TENANT_KEY, TENANTS_KEY, get_collection, open_client
from crag.retrieval.integrity import seal, unseal
from crag.retrieval.library import adopt_untagged, delete, embeddings_for, reused_or_embedded, write
from crag.retrieval.tenancy import mark_changed

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from langchain_core.embeddings import Embeddings

log = logging.getLogger(__name__)

Event = dict[str, Any]
EventHandler = Callable[[Event], None]

#: Chunks embedded and written per Chroma call: small enough for smooth progress and
#: little lost work on a crash, large enough to spread a Chroma write's fixed cost.
BATCH_SIZE = 256


def _batched(items: Sequence[Any], n: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), n):
        yield items[start : start + n]


class _Fatal(Exception):
    """Stops the run: the embedder or the store failed, not one file."""


class Ingestor:
    """One ingest run. `summary` is filled as it goes, so it is valid after Ctrl-C too."""

    def __init__(
        self,
        ctx: Context,
        *,
        collection: str | None = None,
        prune: bool = False,
        rebuild: bool = False,
        force: bool = False,
        embeddings: Embeddings | None = None,
        on_event: EventHandler | None = None,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        self.ctx = ctx
        self.collection_name = collection or ctx.store.collection
        self.prune = prune
        self.rebuild = rebuild
        self.force = force  # a rebuild drops other tenants' and folders' chunks too
        self._embeddings = embeddings
        self.on_event = on_event
        self.batch_size = max(1, batch_size)
        self.chunker = chunker_signature(ctx.store.chunk_size, ctx.store.chunk_overlap)
        self.summary = IngestSummary(
            root="", collection=self.collection_name, tenant=ctx.store.tenant
        )
        self._marked = False
        self._complete: dict[str, tuple[str, int]] = {}  # source: (version, chunks)
        self._client: ClientAPI | None = None
        self._read_ahead = ReadAhead(ctx.store.chunk_size, ctx.store.chunk_overlap)
        self._next: tuple[Path, Stored] | None = None  # the file after the current one
        self._library = ""  # the folder the run's sources are named from (absolute)

    # -- plumbing --
    def _emit(self, event: str, **data: Any) -> None:
        if self.on_event is not None:
            self.on_event({"event": event, **data})

    @property
    def embeddings(self) -> Embeddings:
        """Built on first need, so a run with nothing to embed never loads a model."""
        if self._embeddings is None:
            self._embeddings = embeddings_for(self.ctx)
        return self._embeddings

    def _changing(self, collection: Collection) -> None:
        """Before the first write of a run: a new collection version (crash-safe, since
        a stale version would outlive a run killed after its first write). The recorded
        index files are forgotten first: a run killed from here on leaves none."""
        if not self._marked:
            if self._client is not None:
                unseal(self._client, self.collection_name)
            mark_changed(collection, self.ctx.store.tenant)
            self._marked = True

    def _changed_again(self, collection: Collection) -> None:
        """After the last write: a new version once more. A store lost by now is the
        run's error (or the one it already has), not a crash."""
        try:
            mark_changed(collection, self.ctx.store.tenant)
        except StoreError as exc:
            self.summary.error = self.summary.error or str(exc)

    def _delete(self, collection: Collection, ids: Sequence[str]) -> None:
        if ids:
            self._changing(collection)
            delete(collection, ids)

    # -- the run --
    def run(self, path: Path | str) -> IngestSummary:
        start = time.perf_counter()
        path = Path(path).expanduser()
        found = discover(path)
        for flag, wanted in (("--prune", self.prune), ("--rebuild", self.rebuild)):
            if wanted and path.is_file():  # it would drop every other file's chunks
                raise IngestError(f"{flag} needs a folder, not a single file", exit_code=2)
        summary = self.summary
        summary.root = str(found.root)
        if self.ctx.store.chroma_url:
            open_client(self.ctx)  # a server that does not answer: before HOME is touched
        try:
            with home_lock(self.ctx):
                if self._untouched(found):
                    return summary
                self._client = client = self._open(found)
                collection = get_collection(
                    client, self.collection_name, create=True, embeddings=self.ctx.models.embeddings
                )
                self._adopt(client, collection)
                stored = scan(collection, self.ctx.store.tenant)
                found = found.within({s.library for s in stored.values() if s.library})
                self._library = found.library
                self._emit(
                    "start",
                    root=str(found.root),
                    collection=self.collection_name,
                    files=len(found.files),
                )
                for folder, reason in found.errors:
                    report = FileReport(source=folder, status="failed", reason=reason)
                    summary.files.append(report)
                    self._emit("file_done", index=-1, **asdict(report))
                for index, file in enumerate(found.files):
                    source = found.source(file)
                    self._next = None
                    for after in found.files[index + 1 : index + 2]:
                        self._next = (after, stored.get(found.source(after), Stored()))
                    self._emit("file", index=index, source=source)
                    try:
                        report = self._ingest_file(
                            collection, file, source, stored.get(source, Stored()), index
                        )
                    except _Fatal as exc:
                        log.debug("the run stopped at %s", source, exc_info=exc.__cause__)
                        summary.error = str(exc)
                        summary.not_processed = len(found.files) - index
                        break
                    summary.files.append(report)
                    self._emit("file_done", index=index, **asdict(report))
                if self.prune and summary.error is None:
                    self._prune(collection, stored, found)
                if self._marked:  # a run that read the library while it changed is stale too
                    self._changed_again(collection)
                self._seal(client, collection)
                if summary.error is None and not self.ctx.store.chroma_url:
                    write_manifest(self.ctx, self.collection_name, self._complete)
        except KeyboardInterrupt:
            summary.interrupted = True
            summary.not_processed = max(0, len(found.files) - len(summary.files))
            raise
        finally:
            self._read_ahead.close()
            summary.seconds = time.perf_counter() - start
            self._emit("done", summary=summary.to_dict())
        return summary

    def _untouched(self, found: Discovery) -> bool:
        """Every file as the last complete ingest left it, and nothing written since
        (`crag.ingest.stored`): reported so without opening Chroma."""
        if self.rebuild or self.prune or self.ctx.store.chroma_url or found.errors:
            return False
        chunks = unchanged(self.ctx, self.collection_name, found, self.chunker)
        if chunks is None:
            return False
        self._emit(
            "start", root=str(found.root), collection=self.collection_name, files=len(chunks)
        )
        for index, (source, n) in enumerate(chunks.items()):
            self._emit("file", index=index, source=source)
            report = FileReport(source=source, status="unchanged", chunks=n)
            self.summary.files.append(report)
            self._emit("file_done", index=index, **asdict(report))
        return True

    def _open(self, found: Discovery) -> ClientAPI:
        """The store's client; for a rebuild, after the collection was dropped."""
        if not self.rebuild:
            return open_client(self.ctx, create=True)
        return dropped(
            self.ctx, self.collection_name, self.embeddings, self._emit, found, self.force
        )

    def _adopt(self, client: ClientAPI, collection: Collection) -> None:
        """A collection written before tenants existed: its chunks become the default
        tenant's (metadata only), so that every chunk names its tenant from now on."""
        if not (collection.metadata or {}).get(TENANTS_KEY):
            unseal(client, self.collection_name)  # the run reseals when it ends
            stamped = adopt_untagged(collection)
            if stamped:
                self._emit("adopted", collection=self.collection_name, chunks=stamped)

    def _seal(self, client: ClientAPI, collection: Collection) -> None:
        """Record the index files as this run leaves them; a damaged index is the run's error."""
        try:
            problem = seal(client, collection, self.collection_name)
        except StoreError as exc:
            problem = str(exc)
        if problem and self.summary.error is None:
            self.summary.error = (
                f"the vector index of collection {self.collection_name!r} is damaged after this "
                f"run ({problem}); rebuild it: run the same command with --rebuild"
            )

    def _ingest_file(
        self, collection: Collection, file: Path, source: str, stored: Stored, index: int
    ) -> FileReport:
        started = time.perf_counter()
        report = FileReport(source=source, status="failed")
        try:
            data = read_bytes(file)
            file_hash = sha256_hex(data)
            version = file_version(file_hash, self.chunker)
            if stored.is_complete(version):
                stale = sorted(set(stored.ids) - stored.version_ids(version))
                self._delete(collection, stale)
                report.status, report.deleted = "unchanged", len(stale)
                report.chunks = len(stored.version_ids(version))
                self._complete[source] = (version, report.chunks)
                return report
            if (elsewhere := stored.elsewhere(source, self._library)) is not None:
                raise LoadError(
                    file,
                    f"{elsewhere} is in collection {self.collection_name!r} under the same name: "
                    "ingest one of the two folders into another collection (--collection)",
                )
            doc, chunks = self._read_ahead.load(file, data)
            if self._next is not None:  # read while this file is embedded
                self._read_ahead.start(*self._next, self.chunker)
            if not chunks:
                raise LoadError(file, "no indexable text (only fragments of a few characters)")
        except LoadError as exc:
            report.reason = exc.reason
            report.seconds = time.perf_counter() - started
            return report

        report.pages, report.chunks, report.warnings = doc.page_count, len(chunks), doc.warnings
        ids = [chunk_id(source, version, c.index, self.ctx.store.tenant) for c in chunks]
        present = stored.version_ids(version)
        todo = [(cid, c) for cid, c in zip(ids, chunks, strict=True) if cid not in present]
        self._emit(
            "loaded",
            index=index,
            source=source,
            pages=doc.page_count,
            chunks=len(chunks),
            todo=len(todo),
        )
        base_meta: dict[str, Any] = {
            TENANT_KEY: self.ctx.store.tenant,
            "source": source,
            "library": self._library,
            "title": doc.title,
            "front_matter": doc.front_matter,
            "kind": doc.kind,
            "file_hash": file_hash,
            "version": version,
            "chunks": len(chunks),
            **provenance(doc, file, source),
        }
        written: list[str] = []
        try:
            for batch in _batched(todo, self.batch_size):
                vectors, embedded = self._vectors(collection, [c for _, c in batch])
                self._changing(collection)
                write(
                    collection,
                    [cid for cid, _ in batch],
                    vectors,
                    [c.text for _, c in batch],
                    [chunk_metadata(base_meta, c) for _, c in batch],
                )
                written.extend(cid for cid, _ in batch)
                report.embedded += embedded
                report.reused += len(batch) - embedded
                self._emit(
                    "progress", index=index, source=source, done=len(written), todo=len(todo)
                )
        except Exception as exc:
            # Put the file back as it was: its older version, if any, is still complete.
            with contextlib.suppress(Exception):
                self._delete(collection, written)
            raise _Fatal(f"{source}: {describe_error(exc)}") from exc

        keep = set(ids)
        old = sorted(i for i in stored.ids if i not in keep)
        had_complete = bool(stored.complete_versions() - {version})
        self._delete(collection, old)
        report.deleted = len(old)
        report.status = "updated" if had_complete else ("resumed" if present else "indexed")
        report.seconds = time.perf_counter() - started
        self._complete[source] = (version, len(chunks))
        return report

    def _vectors(self, collection: Collection, chunks: list[Chunk]) -> tuple[list[Any], int]:
        """Vectors for `chunks`, and how many were embedded (`reused_or_embedded`)."""
        texts = {sha256_hex(c.text): c.text for c in chunks}
        started = time.perf_counter()
        known, embedded = reused_or_embedded(
            collection, texts, self.ctx.store.tenant, self.embeddings
        )
        self.summary.embed_seconds += time.perf_counter() - started
        return [known[sha256_hex(c.text)] for c in chunks], embedded

    def _prune(self, collection: Collection, stored: dict[str, Stored], found: Discovery) -> None:
        """Remove the chunks of the files of the folder ingested that are no longer there."""
        gone = gone_from(stored, found, self._library)
        for source in gone:
            ids = sorted(stored[source].ids)
            self._delete(collection, ids)
            self.summary.chunks_pruned += len(ids)
        self.summary.pruned = gone
        if gone:
            self._emit("pruned", sources=gone, chunks=self.summary.chunks_pruned)


def ingest_path(
    ctx: Context,
    path: Path | str,
    *,
    collection: str | None = None,
    prune: bool = False,
    rebuild: bool = False,
    force: bool = False,
    embeddings: Embeddings | None = None,
    on_event: EventHandler | None = None,
) -> IngestSummary:
    """Ingest a folder (recursively) or one file into `collection` (default `ctx.store.collection`),
    as `ctx.store.tenant`'s files.

    Raises `IngestError` when the run cannot start (`StoreError` when the store cannot be
    used); per-file problems are reported in the summary instead, and leave the file's
    existing chunks untouched. `rebuild` drops the collection first (refused while it
    holds other tenants' or folders' chunks, unless `force`).
    """
    return Ingestor(
        ctx,
        collection=collection,
        prune=prune,
        rebuild=rebuild,
        force=force,
        embeddings=embeddings,
        on_event=on_event,
    ).run(path)
