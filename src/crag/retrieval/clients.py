"""Chroma clients and collections: one client per location, cosine collections, and
the metadata keys crag stores on them.

crag always computes embeddings itself and hands Chroma vectors: a collection's
default embedding function would try to download a model on first use, which
fails offline. Each collection records the embeddings spec it was built with,
so a query embedded by a different model is refused instead of returning noise.
A collection's persisted index is checked before Chroma loads it (`integrity`).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from crag.context import Context
from crag.errors import StoreError
from crag.retrieval.integrity import (
    check_index,
    forget_verified,
    seal_file,
    store_path,
    unseal,
    vector_segment,
)
from crag.retrieval.store_errors import guard, location, store_error

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection


#: Collection metadata key holding the embeddings spec used to build it.
EMBEDDINGS_KEY = "crag_embeddings"
#: Collection metadata key that changes whenever an ingest changes the collection.
VERSION_KEY = "crag_version"
#: Chunk metadata key: the tenant whose library holds the chunk.
TENANT_KEY = "tenant"
#: Collection metadata key, set once every chunk of the collection names its tenant.
TENANTS_KEY = "crag_tenants"


_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{1,510})[A-Za-z0-9]")


def check_collection_name(name: str) -> None:
    """Chroma's naming rule, checked up front so a typo is a usage error, not a crash."""
    if not _NAME.fullmatch(name or "") or ".." in name:
        raise StoreError(
            f"bad collection name {name!r}: use 3-512 characters from a-z, A-Z, 0-9, '.', "
            "'_' and '-', starting and ending with a letter or digit"
        )


# --- clients ---------------------------------------------------------------------------------


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


def check_home(ctx: Context) -> None:
    """`ctx.store.home` (and the store in it) must be folders, if they exist at all."""
    for path in (ctx.store.home, ctx.store.chroma_path):
        if path.exists() and not path.is_dir():
            raise StoreError(
                f"{path} is not a folder: point --home / CRAG_HOME at a folder (crag keeps its "
                "store in HOME/chroma)"
            )


def _client_key(ctx: Context) -> str:
    return (
        f"url:{ctx.store.chroma_url}"
        if ctx.store.chroma_url
        else f"path:{ctx.store.chroma_path.resolve()}"
    )


def _drop_system(path: Path) -> None:
    """Forget chromadb's own per-folder system, e.g. one left half-built by a failed open:
    the next client of that folder then starts afresh."""
    with contextlib.suppress(Exception):
        from chromadb.api.shared_system_client import SharedSystemClient

        SharedSystemClient._identifier_to_system.pop(str(path), None)
        SharedSystemClient._identifier_to_refcount.pop(str(path), None)


def open_client(ctx: Context, *, create: bool = False) -> ClientAPI:
    """A Chroma client for `ctx` (server at `ctx.store.chroma_url`, else `ctx.store.chroma_path`).

    Cached per location: a persistent client is not cheap to open, and the
    retrieve node calls this once per question. Only a writer (`create`) makes a new
    embedded store: asking a library that was never ingested says so instead.
    """
    key = _client_key(ctx)
    if not ctx.store.chroma_url:
        check_home(ctx)
        if not create and not (ctx.store.chroma_path / "chroma.sqlite3").is_file():
            raise StoreError(
                f"no library at {ctx.store.home}: build one with "
                f"`crag ingest PATH --home {ctx.store.home}` "
                "(or point --home / CRAG_HOME at an existing one)"
            )
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is not None:
            return client
        import chromadb  # about a second to import: only when a store is opened

        if ctx.store.chroma_url:
            try:
                client = _http_client(ctx.store.chroma_url, ctx.search.timeout_s)
            except Exception as exc:
                raise StoreError(
                    f"cannot reach the Chroma server at {ctx.store.chroma_url} ({exc}); start it "
                    "with `chroma run --path DIR --port N`, or unset CRAG_CHROMA_URL to use "
                    f"the embedded store in {ctx.store.chroma_path}"
                ) from exc
        else:
            try:
                ctx.store.chroma_path.mkdir(parents=True, exist_ok=True)
                client = chromadb.PersistentClient(
                    path=str(ctx.store.chroma_path), settings=_settings()
                )
            except BaseException as exc:  # a PanicException is no Exception
                if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
                    raise
                _drop_system(ctx.store.chroma_path)
                problem = store_error(exc, str(ctx.store.chroma_path), ctx.store.collection)
                raise problem or StoreError(
                    f"cannot open the Chroma store at {ctx.store.chroma_path}: {exc}"
                ) from exc
        _CLIENTS[key] = client
        return client


def forget_clients() -> None:
    """Drop cached clients (tests that delete a store folder, long-lived servers)."""
    with _CLIENTS_LOCK:
        _CLIENTS.clear()
    forget_handles()
    forget_verified()


def set_aside_store(ctx: Context) -> Path:
    """Move a damaged embedded store out of the way (to HOME/chroma.damaged-TIME), so that
    the next writer starts a new one; returns where it went."""
    with _CLIENTS_LOCK:
        _CLIENTS.pop(_client_key(ctx), None)
    forget_handles()
    _drop_system(ctx.store.chroma_path)
    forget_verified()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = ctx.store.chroma_path.with_name(f"{ctx.store.chroma_path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = ctx.store.chroma_path.with_name(
            f"{ctx.store.chroma_path.name}.damaged-{stamp}-{n}"
        )
    try:
        ctx.store.chroma_path.rename(target)
        seal_file(ctx.store.chroma_path).unlink(missing_ok=True)
    except OSError as exc:
        raise store_error(exc, str(ctx.store.chroma_path)) or StoreError(str(exc)) from exc
    return target


#: How long a reader reuses a collection's handle, and so the metadata it carries (the
#: library's version, its tenants): one question opens its collections several times.
HANDLE_TTL_S = 1.0
_HANDLES: dict[tuple[int, str], tuple[ClientAPI, Collection, float]] = {}
_HANDLES_LOCK = threading.Lock()
_forgotten = 0  # how many times the handles were dropped: a reader opening one meanwhile keeps it


def forget_handles() -> None:
    """Drop reused collection handles: this process changed a collection's metadata (or
    deleted it), and its next reader must see that at once."""
    global _forgotten
    with _HANDLES_LOCK:
        _HANDLES.clear()
        _forgotten += 1


def modify_metadata(collection: Collection, metadata: dict[str, Any]) -> None:
    """Replace a collection's metadata, and let no reader of this process keep the old."""
    with guard(collection, collection.name):
        collection.modify(metadata=metadata)
    forget_handles()


def get_collection(
    client: ClientAPI, name: str, *, create: bool = False, embeddings: str | None = None
) -> Collection:
    """The collection `name` in cosine space, without a Chroma embedding function.

    With `embeddings`, a new collection records that spec and an existing one
    must have been built with it. The collection's persisted vector index is checked
    (`check_index`) before anything can make Chroma load it. A plain read reuses the
    handle opened within the last `HANDLE_TTL_S` (another process's change to the
    collection's metadata is seen that much later; its chunks at once).
    """
    if create or embeddings:
        return _open_collection(client, name, create=create, embeddings=embeddings)
    key, now = (id(client), name), time.monotonic()
    with _HANDLES_LOCK:
        held, era = _HANDLES.get(key), _forgotten
    if held is not None and held[0] is client and now - held[2] < HANDLE_TTL_S:
        return held[1]
    collection = _open_collection(client, name)
    with _HANDLES_LOCK:
        if era == _forgotten:  # else a change came while it opened: it may predate it
            _HANDLES[key] = (client, collection, now)
    return collection


def _open_collection(
    client: ClientAPI, name: str, *, create: bool = False, embeddings: str | None = None
) -> Collection:
    from chromadb.errors import InvalidArgumentError, NotFoundError  # see open_client

    check_collection_name(name)
    with guard(client, name):
        try:
            if create:  # a new collection's chunks all name their tenant
                metadata: dict[str, Any] = {TENANTS_KEY: True}
                if embeddings:
                    metadata[EMBEDDINGS_KEY] = embeddings
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
            problem = store_error(exc, location(client), name)
            raise problem or StoreError(f"cannot use collection {name!r}: {exc}") from exc

    check_index(client, collection, name)
    space = _space(collection)
    if space not in (None, "cosine"):
        raise StoreError(
            f"collection {name!r} uses {space!r} distance, but crag needs cosine; "
            "ingest into a new collection"
        )
    if embeddings:
        built_with = (collection.metadata or {}).get(EMBEDDINGS_KEY)
        if built_with is None:
            modify_metadata(collection, {**(collection.metadata or {}), EMBEDDINGS_KEY: embeddings})
        elif built_with != embeddings:
            raise StoreError(
                f"collection {name!r} was built with embeddings {built_with!r}, not "
                f"{embeddings!r}; use the same embeddings or ingest into another collection"
            )
    return collection


def drop_collection(client: ClientAPI, name: str) -> bool:
    """Delete collection `name` (for a rebuild), even when its vector index is damaged:
    its index folder is removed from disk first, so Chroma never loads it. False if there
    was no such collection."""
    from chromadb.errors import NotFoundError  # see open_client

    check_collection_name(name)
    store = store_path(client)
    with guard(client, name):
        try:
            collection = client.get_collection(name, embedding_function=None)  # metadata only
        except NotFoundError:
            collection = None
        if collection is not None and store is not None:
            segment = vector_segment(store, str(collection.id), name)
            if segment:
                shutil.rmtree(store / segment, ignore_errors=True)
                forget_verified(store / segment)
        if collection is not None:
            client.delete_collection(name)
    forget_handles()  # also when another process deleted it: this one may hold its handle
    if store is not None:
        unseal(client, name)
    return collection is not None


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
