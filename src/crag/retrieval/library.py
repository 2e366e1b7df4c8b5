"""The library in Chroma: the only module that talks to Chroma.

One client per location, cosine collections, similarity search, paged reading
and writing, and store hits turned into citable passages.

crag always computes embeddings itself and hands Chroma vectors: a collection's
default embedding function would try to download a model on first use, which
fails offline. Each collection records the embeddings spec it was built with,
so a query embedded by a different model is refused instead of returning noise.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

from crag.context import Context
from crag.errors import StoreError
from crag.models.embeddings import make_embeddings
from crag.state import Origin, Passage

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

#: Collection metadata key holding the embeddings spec used to build it.
EMBEDDINGS_KEY = "crag_embeddings"
#: Collection metadata key that changes whenever an ingest changes the collection.
VERSION_KEY = "crag_version"


_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{1,510})[A-Za-z0-9]")


def check_collection_name(name: str) -> None:
    """Chroma's naming rule, checked up front so a typo is a usage error, not a crash."""
    if not _NAME.fullmatch(name or "") or ".." in name:
        raise StoreError(
            f"bad collection name {name!r}: use 3-512 characters from a-z, A-Z, 0-9, '.', "
            "'_' and '-', starting and ending with a letter or digit"
        )


def _settings() -> Any:
    from chromadb.config import Settings  # chromadb takes about a second to import

    return Settings(anonymized_telemetry=False)


def _parse_url(url: str) -> tuple[str, int, bool]:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise StoreError(f"invalid Chroma URL {url!r} (expected http://host:port)")
    ssl = parts.scheme == "https"
    try:
        port = parts.port or (443 if ssl else 8000)
    except ValueError as exc:
        raise StoreError(f"invalid port in Chroma URL {url!r}") from exc
    return parts.hostname, port, ssl


def _http_client(url: str, timeout_s: float) -> ClientAPI:
    """A client of the Chroma server at `url` whose every request times out.

    chromadb's HTTP client waits forever (`httpx.Client(timeout=None)`), and already
    talks to the server while it is built: so it is built in a daemon thread given
    `timeout_s`, and its session then gets the timeout for every later request.
    """
    import chromadb  # see open_client
    import httpx  # chromadb's own HTTP library

    host, port, ssl = _parse_url(url)
    done: dict[str, Any] = {}

    def connect() -> None:
        try:
            client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=_settings())
            session = getattr(getattr(client, "_server", None), "_session", None)
            if isinstance(session, httpx.Client):
                session.timeout = httpx.Timeout(timeout_s)
            client.heartbeat()
            done["client"] = client
        except Exception as exc:
            done["error"] = exc

    worker = threading.Thread(target=connect, name="chroma-connect", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise TimeoutError(f"no answer within {timeout_s:g} s")
    if "error" in done:
        raise done["error"]
    return done["client"]


_CLIENTS: dict[str, ClientAPI] = {}
_CLIENTS_LOCK = threading.Lock()


def open_client(ctx: Context, *, create: bool = False) -> ClientAPI:
    """A Chroma client for `ctx` (server at `ctx.chroma_url`, else `ctx.chroma_path`).

    Cached per location: a persistent client is not cheap to open, and the
    retrieve node calls this once per question. Only a writer (`create`) makes a new
    embedded store: asking a library that was never ingested says so instead.
    """
    key = f"url:{ctx.chroma_url}" if ctx.chroma_url else f"path:{ctx.chroma_path.resolve()}"
    if not ctx.chroma_url and not create and not (ctx.chroma_path / "chroma.sqlite3").is_file():
        raise StoreError(
            f"no library at {ctx.home}: build one with `crag ingest PATH --home {ctx.home}` "
            "(or point --home / CRAG_HOME at an existing one)"
        )
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is not None:
            return client
        import chromadb  # about a second to import: only when a store is opened

        if ctx.chroma_url:
            try:
                client = _http_client(ctx.chroma_url, ctx.timeout_s)
            except Exception as exc:
                raise StoreError(
                    f"cannot reach the Chroma server at {ctx.chroma_url} ({exc}); start it "
                    "with `chroma run --path DIR --port N`, or unset CRAG_CHROMA_URL to use "
                    f"the embedded store in {ctx.chroma_path}"
                ) from exc
        else:
            try:
                ctx.chroma_path.mkdir(parents=True, exist_ok=True)
                client = chromadb.PersistentClient(path=str(ctx.chroma_path), settings=_settings())
            except Exception as exc:
                raise StoreError(
                    f"cannot open the Chroma store at {ctx.chroma_path}: {exc}"
                ) from exc
        _CLIENTS[key] = client
        return client


def forget_clients() -> None:
    """Drop cached clients (tests that delete a store folder, long-lived servers)."""
    with _CLIENTS_LOCK:
        _CLIENTS.clear()


def get_collection(
    client: ClientAPI, name: str, *, create: bool = False, embeddings: str | None = None
) -> Collection:
    """The collection `name` in cosine space, without a Chroma embedding function.

    With `embeddings`, a new collection records that spec and an existing one
    must have been built with it.
    """
    from chromadb.errors import InvalidArgumentError, NotFoundError  # see open_client

    check_collection_name(name)
    try:
        if create:
            metadata = {EMBEDDINGS_KEY: embeddings} if embeddings else None
            collection = client.get_or_create_collection(
                name,
                # A wider beam than Chroma's default (100): at library sizes the exact
                # neighbours matter more than microseconds.
                configuration={
                    "hnsw": {"space": "cosine", "ef_search": 256, "ef_construction": 256}
                },
                metadata=metadata,
                embedding_function=None,
            )
        else:
            collection = client.get_collection(name, embedding_function=None)
    except NotFoundError as exc:
        raise StoreError(
            f"collection {name!r} does not exist; build it with `crag ingest PATH"
            f"{'' if name == 'books' else f' --collection {name}'}`"
        ) from exc
    except InvalidArgumentError as exc:
        raise StoreError(f"bad collection name {name!r}: {exc}") from exc
    except ValueError as exc:  # chromadb raises ValueError on a dead server
        raise StoreError(f"cannot use collection {name!r}: {exc}") from exc

    space = _space(collection)
    if space not in (None, "cosine"):
        raise StoreError(
            f"collection {name!r} uses {space!r} distance, but crag needs cosine; "
            "ingest into a new collection"
        )
    if embeddings:
        built_with = (collection.metadata or {}).get(EMBEDDINGS_KEY)
        if built_with is None:
            collection.modify(metadata={**(collection.metadata or {}), EMBEDDINGS_KEY: embeddings})
        elif built_with != embeddings:
            raise StoreError(
                f"collection {name!r} was built with embeddings {built_with!r}, not "
                f"{embeddings!r}; use the same embeddings or ingest into another collection"
            )
    return collection


def _space(collection: Collection) -> str | None:
    try:  # the JSON form: `.configuration` warns about our (absent) embedding function
        config = collection.configuration_json or {}
    except Exception:
        return None
    for index in ("hnsw", "spann"):
        section = config.get(index)
        if isinstance(section, dict) and section.get("space"):
            return str(section["space"])
    return None


def to_similarity(distance: float) -> float:
    """Cosine distance (0..2) → similarity in [0, 1]; anti-correlated texts count as 0."""
    return min(1.0, max(0.0, 1.0 - float(distance)))


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
    collection = get_collection(open_client(ctx), collection_name, embeddings=None)
    built_with = (collection.metadata or {}).get(EMBEDDINGS_KEY)
    if built_with and built_with != ctx.embeddings:
        raise StoreError(
            f"collection {collection_name!r} was built with embeddings {built_with!r} but "
            f"this run uses {ctx.embeddings!r}; set CRAG_EMBEDDINGS={built_with}"
        )
    if k < 1:
        return []
    embedder = make_embeddings(ctx.embeddings, threads=ctx.threads, timeout_s=ctx.timeout_s)
    vector: Sequence[float] = embedder.embed_query(query)
    # Over-fetch, then cut: the approximate index misses fewer true top-k this way.
    result = collection.query(
        query_embeddings=[vector],
        n_results=max(4 * k, 20),
        where=where,
        include=["documents", "metadatas", "distances", "embeddings"],
    )
    ids = result["ids"][0] if result["ids"] else []
    docs = (result.get("documents") or [[]])[0]
    vectors = result.get("embeddings")
    if vectors is not None and len(vectors):
        # The grader will score these chunks next: spare it re-running the model.
        embedder.remember([d or "" for d in docs], list(vectors[0]))
    metas = (result.get("metadatas") or [[]])[0]
    dists = (result.get("distances") or [[]])[0]
    order = sorted(range(len(ids)), key=lambda i: (dists[i], ids[i]))[:k]
    return [
        {
            "id": ids[i],
            "text": docs[i] or "",
            "metadata": dict(metas[i] or {}),
            "similarity": to_similarity(dists[i]),
        }
        for i in order
    ]


def describe(ctx: Context, collection_name: str) -> dict[str, Any]:
    """What a collection holds: chunk count, files, embeddings spec (for `crag status`)."""
    collection = get_collection(open_client(ctx), collection_name)
    sources = {
        str(r.metadata["source"]) for r in iter_records(collection) if "source" in r.metadata
    }
    return {
        "collection": collection_name,
        "location": ctx.chroma_url or str(ctx.chroma_path),
        "chunks": collection.count(),
        "files": len(sources),
        "embeddings": (collection.metadata or {}).get(EMBEDDINGS_KEY),
    }


class Record(NamedTuple):
    """One stored chunk as paged reading returns it."""

    id: str
    text: str
    metadata: dict[str, Any]


def iter_records(
    collection: Collection, *, texts: bool = False, page: int = 5000
) -> Iterator[Record]:
    """Every chunk of a collection with its metadata (and text), read in pages."""
    include: Any = ["metadatas", "documents"] if texts else ["metadatas"]
    offset = 0
    while True:
        got = collection.get(include=include, limit=page, offset=offset)
        ids = got["ids"]
        docs = got.get("documents") or [""] * len(ids)
        for cid, text, meta in zip(ids, docs, got.get("metadatas") or [], strict=False):
            yield Record(cid, text or "", dict(meta or {}))
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
    """Insert or replace chunks with the vectors crag computed (never Chroma's own)."""
    collection.upsert(
        ids=list(ids),
        embeddings=list(vectors),
        documents=list(texts),
        metadatas=list(metadatas),
    )


def delete(collection: Collection, ids: Sequence[str]) -> None:
    for start in range(0, len(ids), _DELETE_BATCH):
        collection.delete(ids=list(ids[start : start + _DELETE_BATCH]))


def vectors_by(collection: Collection, key: str, values: Sequence[str]) -> dict[str, list[float]]:
    """The stored vector of one chunk per metadata value `key` (e.g. a content hash)."""
    known: dict[str, list[float]] = {}
    for start in range(0, len(values), _IN_BATCH):
        where: Any = {key: {"$in": list(values[start : start + _IN_BATCH])}}
        got = collection.get(where=where, include=["embeddings", "metadatas"])
        embeddings = got.get("embeddings")
        if embeddings is None:
            continue
        for meta, vector in zip(got.get("metadatas") or [], embeddings, strict=False):
            if meta and meta.get(key) not in known:
                known[str(meta[key])] = [float(x) for x in vector]
    return known


def mark_changed(collection: Collection) -> None:
    """Give the collection a new version: what was derived from its text is stale."""
    collection.modify(metadata={**(collection.metadata or {}), VERSION_KEY: uuid.uuid4().hex})


def library_version(ctx: Context, collection_name: str) -> str:
    """Changes whenever the collection's chunks do (the chunk count for a collection
    written before versions were kept)."""
    collection = get_collection(open_client(ctx), collection_name)
    version = (collection.metadata or {}).get(VERSION_KEY)
    return str(version) if version else f"count:{collection.count()}"


def all_texts(ctx: Context, collection_name: str) -> list[str]:
    """Every chunk's text (for indexes derived from the whole library)."""
    collection = get_collection(open_client(ctx), collection_name)
    return [r.text for r in iter_records(collection, texts=True)]


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
    return passage
