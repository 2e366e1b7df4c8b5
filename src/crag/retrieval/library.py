"""The library in Chroma: similarity search, paged reading and writing, and store hits
turned into citable passages (clients and collections: `clients`; whose chunks are
whose, and each tenant's library version: `tenancy`).

A query embedded by a different model than the collection was built with is refused
instead of returning noise.

Tenants share a collection: every chunk names its tenant in its metadata
(`TENANT_KEY`), and every read here is filtered by the run's tenant, so no caller
can forget the filter. A collection written before tenants existed has no tenant
key on its chunks; they are the default tenant's, and the next ingest into it
stamps them so (`adopt_untagged`, metadata only, nothing re-embedded).

A chunk's text is kept in its metadata (`TEXT_KEY`), not as Chroma's document: Chroma
indexes every document for full-text search, which crag never runs and a local store
cannot switch off. Chunks written before keep their text as the document; both read.

Chroma's failures come back as one-line `StoreError`s naming the cause and the fix
(`store_errors`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from crag.context import DEFAULT_TENANT, Context
from crag.errors import StoreError
from crag.models.remembering import STRIPS_KEY, remember_strips
from crag.retrieval.clients import (
    EMBEDDINGS_KEY,
    TENANT_KEY,
    TENANTS_KEY,
    VERSION_KEY,
    get_collection,
    modify_metadata,
    open_client,
)
from crag.retrieval.store_errors import guard, rebuild_hint
from crag.retrieval.tenancy import belongs, tenant_where, version_key

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection
    from langchain_core.embeddings import Embeddings

    from crag.models.remembering import Remembering
    from crag.state import Origin, Passage

log = logging.getLogger(__name__)


#: Chunk metadata that holds the chunk's text.
TEXT_KEY = "text"


def unpacked(document: str | None, metadata: Any) -> tuple[str, dict[str, Any]]:
    """A stored chunk's text and the metadata a reader sees (without the text, or the
    strip vectors an earlier ingest stored)."""
    meta = {key: v for key, v in (metadata or {}).items() if key != STRIPS_KEY}
    return str(meta.pop(TEXT_KEY, None) or document or ""), meta


def to_similarity(distance: float) -> float:
    """Cosine distance (0..2) → similarity in [0, 1]; anti-correlated texts count as 0."""
    return min(1.0, max(0.0, 1.0 - float(distance)))


def embeddings_for(ctx: Context) -> Remembering:
    """The run's embedder, imported on first need: an ingest that embeds nothing never
    loads the embeddings' libraries."""
    from crag.models.embeddings import embeddings_for as make

    return make(ctx)


def retrieve(
    ctx: Context,
    collection_name: str,
    query: str,
    k: int,
    *,
    where: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The `k` chunks most similar to `query`, best first.

    Each hit: `id`, `text`, `metadata` (source, title, page, ...), `similarity`
    in [0, 1]. An empty collection gives an empty list.
    """
    return retrieve_many(ctx, collection_name, [query], k, where=where)[0]


def retrieve_many(
    ctx: Context,
    collection_name: str,
    queries: Sequence[str],
    k: int,
    *,
    where: dict[str, Any] | None = None,
) -> list[list[dict[str, Any]]]:
    """`retrieve` for several queries in one search of the store: the hits of each."""
    collection = get_collection(open_client(ctx), collection_name, embeddings=None)
    built_with = (collection.metadata or {}).get(EMBEDDINGS_KEY)
    if built_with and built_with != ctx.models.embeddings:
        raise StoreError(
            f"collection {collection_name!r} was built with embeddings {built_with!r} but "
            f"this run uses {ctx.models.embeddings!r}; set CRAG_EMBEDDINGS={built_with}"
        )
    if k < 1 or not queries:
        return [[] for _ in queries]
    embedder = embeddings_for(ctx)
    vectors: list[Sequence[float]] = [embedder.embed_query(q) for q in queries]
    dimension = getattr(getattr(collection, "_model", None), "dimension", None)
    if isinstance(dimension, int) and dimension != len(vectors[0]):
        raise StoreError(
            f"collection {collection_name!r} holds {dimension}-dimensional vectors, but "
            f"embeddings {ctx.models.embeddings!r} give {len(vectors[0])}: ask with the "
            f"embeddings it was built with, or rebuild it with these: "
            f"{rebuild_hint(collection_name)}"
        )
    # Over-fetch, then cut: the approximate index misses fewer true top-k this way. Only
    # distances at first: a chunk's stored strip vectors make its metadata long.
    with guard(collection, collection_name):
        result = collection.query(
            query_embeddings=vectors,
            n_results=max(4 * k, 20),
            where=_both(where, tenant_where(collection, ctx.store.tenant)),
            include=["distances"],
        )
    ranked = [
        sorted(zip(ids, dists, strict=True), key=lambda hit: (hit[1], hit[0]))
        for ids, dists in zip(result["ids"] or [], result.get("distances") or [], strict=True)
    ]
    chunks = _read_hits(ctx, collection, ranked, k)
    hits: list[list[dict[str, Any]]] = []
    for of_query in ranked:
        mine = [(cid, dist) for cid, dist in of_query if cid in chunks][:k]
        hits.append([{**chunks[cid], "similarity": to_similarity(dist)} for cid, dist in mine])
    return hits


def _read_hits(
    ctx: Context, collection: Collection, ranked: list[list[tuple[str, float]]], k: int
) -> dict[str, dict[str, Any]]:
    """The text and metadata of the tenant's best `k` hits of each query, read by id a
    window at a time (a hit of another tenant is passed over), their vectors and their
    strips' handed to the embedder, which grading and refinement use next (a store's
    chunk vectors; strips embedded now, unless the embedder knows them already)."""
    embedder = embeddings_for(ctx)
    chunks: dict[str, dict[str, Any]] = {}
    others: set[str] = set()
    for start in range(0, max((len(r) for r in ranked), default=0), k):
        wanted = [
            cid
            for of_query in ranked
            if sum(cid in chunks for cid, _ in of_query) < k
            for cid, _ in of_query[start : start + k]
            if cid not in chunks and cid not in others
        ]
        if not wanted:
            break
        with guard(collection, collection.name):
            got = collection.get(
                ids=list(dict.fromkeys(wanted)), include=["documents", "metadatas", "embeddings"]
            )
        docs = got.get("documents") or [""] * len(got["ids"])
        metas: list[Any] = list(got.get("metadatas") or [])
        metas += [None] * (len(got["ids"]) - len(metas))
        embedded = got.get("embeddings")
        texts: list[str] = []
        vectors: list[Any] = []
        read: list[str] = []
        for i, cid in enumerate(got["ids"]):
            if not belongs(metas[i], collection, ctx.store.tenant):
                others.add(cid)  # a tenant's first ingest running meanwhile, or another writer
                continue
            text, meta = unpacked(docs[i], metas[i])
            read.append(text)
            if embedded is not None:
                texts.append(text)
                vectors.append(embedded[i])
            chunks[cid] = {
                "id": cid,
                "text": text,
                "metadata": meta,
            }
        embedder.remember(texts, vectors)
        remember_strips(embedder, read, ctx.refinement.strip_sentences)
    if others:
        log.debug("passed over %d chunk(s) of other tenants in a query", len(others))
    return chunks


def describe(ctx: Context, collection_name: str) -> dict[str, Any]:
    """What the tenant's part of a collection holds: chunk count, files, embeddings spec."""
    records = list(tenant_records(ctx, collection_name))
    collection = get_collection(open_client(ctx), collection_name)
    return {
        "collection": collection_name,
        "tenant": ctx.store.tenant,
        "location": ctx.store.chroma_url or str(ctx.store.chroma_path),
        "chunks": len(records),
        "files": len({str(r.metadata["source"]) for r in records if "source" in r.metadata}),
        "embeddings": (collection.metadata or {}).get(EMBEDDINGS_KEY),
    }


class Record(NamedTuple):
    """One stored chunk as paged reading returns it."""

    id: str
    text: str
    metadata: dict[str, Any]


def iter_records(
    collection: Collection,
    *,
    texts: bool = False,
    page: int = 5000,
    where: dict[str, Any] | None = None,
) -> Iterator[Record]:
    """Every chunk of a collection (matching `where`) with its metadata (and text), read
    in pages. Every tenant's: a run reads `tenant_records`."""
    include: Any = ["metadatas", "documents"] if texts else ["metadatas"]
    offset = 0
    while True:
        with guard(collection, collection.name):
            got = collection.get(include=include, limit=page, offset=offset, where=where)
        ids = got["ids"]
        docs = got.get("documents") or [""] * len(ids)
        for cid, document, meta in zip(ids, docs, got.get("metadatas") or [], strict=False):
            yield Record(cid, *unpacked(document, meta))
        if len(ids) < page:
            return
        offset += len(ids)


# Chroma caps the ids of one delete and the values of one `$in` filter.
_DELETE_BATCH = 5000
_IN_BATCH = 250


def write(
    collection: Collection,
    ids: Sequence[str],
    vectors: Sequence[Any],
    texts: Sequence[str],
    metadatas: Sequence[dict[str, Any]],
) -> None:
    """Insert or replace chunks with the vectors crag computed (never Chroma's own), each
    text in its metadata."""
    with guard(collection, collection.name):
        collection.upsert(
            ids=list(ids),
            embeddings=list(vectors),
            metadatas=[{**m, TEXT_KEY: t} for m, t in zip(metadatas, texts, strict=True)],
        )


def delete(collection: Collection, ids: Sequence[str]) -> None:
    for start in range(0, len(ids), _DELETE_BATCH):
        with guard(collection, collection.name):
            collection.delete(ids=list(ids[start : start + _DELETE_BATCH]))


def vectors_by(
    collection: Collection, key: str, values: Sequence[str], tenant: str
) -> dict[str, list[float]]:
    """The stored vector of one of `tenant`'s chunks per metadata value `key` (e.g. a
    content hash). Only the tenant's own: a vector reused from another tenant's chunk
    would tell (in an ingest's counts) that the other tenant holds the same text."""
    known: dict[str, list[float]] = {}
    for start in range(0, len(values), _IN_BATCH):
        batch = list(values[start : start + _IN_BATCH])
        where: Any = {"$and": [{key: {"$in": batch}}, {TENANT_KEY: tenant}]}
        with guard(collection, collection.name):
            got = collection.get(where=where, include=["embeddings", "metadatas"])
        embeddings = got.get("embeddings")
        if embeddings is None:
            continue
        for meta, vector in zip(got.get("metadatas") or [], embeddings, strict=False):
            if meta and meta.get(key) not in known:
                known[str(meta[key])] = [float(x) for x in vector]
    return known


def reused_or_embedded(
    collection: Collection, texts: dict[str, str], tenant: str, embeddings: Embeddings
) -> tuple[dict[str, list[float]], int]:
    """A vector per text (keyed by its content hash): reused from any of the tenant's
    chunks with the same text, else embedded; and how many were embedded."""
    known = vectors_by(collection, "content_hash", sorted(texts), tenant)
    missing = [h for h in sorted(texts) if h not in known]
    vectors = embeddings.embed_documents([texts[h] for h in missing]) if missing else []
    if len(vectors) != len(missing):  # a vector lost or added would go beside another text
        raise RuntimeError(f"the embedder returned {len(vectors)} vectors for {len(missing)} texts")
    return known | dict(zip(missing, vectors, strict=True)), len(missing)


def _both(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    if a and b:
        return {"$and": [a, b]}
    return a or b


def tenant_records(
    ctx: Context, collection_name: str, *, texts: bool = False, page: int = 5000
) -> Iterator[Record]:
    """Every chunk of the run's tenant in a collection, read in pages."""
    collection = get_collection(open_client(ctx), collection_name)
    where = tenant_where(collection, ctx.store.tenant)
    for record in iter_records(collection, texts=texts, page=page, where=where):
        if belongs(record.metadata, collection, ctx.store.tenant):
            yield record


def adopt_untagged(collection: Collection) -> int:
    """Stamp every chunk without a tenant as the default tenant's (metadata only), and mark
    the collection as fully tagged; returns how many were stamped. For a collection
    written before tenants existed, before another tenant writes to it."""
    metadata = collection.metadata or {}
    if metadata.get(TENANTS_KEY):
        return 0
    untagged = [r.id for r in iter_records(collection) if TENANT_KEY not in r.metadata]
    for start in range(0, len(untagged), _DELETE_BATCH):
        ids = untagged[start : start + _DELETE_BATCH]
        with guard(collection, collection.name):
            collection.update(ids=ids, metadatas=[{TENANT_KEY: DEFAULT_TENANT}] * len(ids))
    marks: dict[str, Any] = {TENANTS_KEY: True}
    if untagged and not metadata.get(version_key(DEFAULT_TENANT)):  # see `tenants_of`
        marks[version_key(DEFAULT_TENANT)] = metadata.get(VERSION_KEY) or uuid.uuid4().hex
    modify_metadata(collection, {**metadata, **marks})
    return len(untagged)


def sourced_texts(
    ctx: Context, collection_name: str
) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(source, text) of every chunk of the tenant, and each document's front matter (the
    title block its first page opens with) by source."""
    found: list[tuple[str, str]] = []
    fronts: dict[str, str] = {}
    for record in tenant_records(ctx, collection_name, texts=True):
        source = str(record.metadata.get("source", ""))
        found.append((source, record.text))
        if front := record.metadata.get("front_matter"):
            fronts.setdefault(source, str(front))
    return found, fronts


def hit_to_passage(hit: dict[str, Any], origin: Origin) -> Passage:
    """A store hit (id, text, metadata, similarity) as a citable Passage."""
    meta = hit.get("metadata") or {}
    passage: Passage = {
        "id": str(hit["id"]),
        "text": str(hit["text"]),
        "origin": origin,
        "source": str(meta.get("source", "?")),
        "similarity": float(hit.get("similarity", 0.0)),
    }
    if meta.get("page") not in (None, ""):
        passage["page"] = str(meta["page"])
    if meta.get("title"):
        passage["title"] = str(meta["title"])
    if meta.get("url"):
        passage["url"] = str(meta["url"])
    if meta.get("date"):  # chunks ingested before dates were read have none: undated
        passage["date"] = str(meta["date"])
        if meta.get("dated_by") in ("text", "pdf", "published", "file"):
            passage["dated_by"] = meta["dated_by"]
    if meta.get("source_kind"):
        passage["kind"] = str(meta["source_kind"])
    return passage
