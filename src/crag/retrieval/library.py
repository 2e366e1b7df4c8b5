"""The library in Chroma: the only module that talks to Chroma.

One client per location, cosine collections, similarity search, paged reading
and writing, and store hits turned into citable passages.

crag always computes embeddings itself and hands Chroma vectors: a collection's
default embedding function would try to download a model on first use, which
fails offline. Each collection records the embeddings spec it was built with,
so a query embedded by a different model is refused instead of returning noise.

Tenants share a collection: every chunk names its tenant in its metadata
(`TENANT_KEY`), and every read here is filtered by the run's tenant, so no caller
can forget the filter. A collection written before tenants existed has no tenant
key on its chunks; they are the default tenant's, and the next ingest into it
stamps them so (`adopt_untagged`, metadata only, nothing re-embedded).

Chroma's failures come back as one-line `StoreError`s naming the cause and the fix
(full disk, read-only folder, damaged database, lost server), and a collection's
persisted vector index is checked before Chroma loads it: Chroma's native loader
crashes the whole process on a damaged file (see "Integrity" below).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import sqlite3
import struct
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

from crag.context import DEFAULT_TENANT, Context
from crag.errors import CragError, DamagedStore, StoreError
from crag.models.embeddings import embeddings_for
from crag.state import Origin, Passage

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

log = logging.getLogger(__name__)

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


def _rebuild_hint(collection: str | None) -> str:
    extra = f" --collection {collection}" if collection and collection != "books" else ""
    return f"`crag ingest FOLDER{extra} --rebuild`"


# --- Chroma's failures, as one line each -------------------------------------------------------


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
            f"library with {_rebuild_hint(collection)} (the damaged store is moved aside)",
            part="database",
            collection=collection,
        )
    if "dimension" in low:
        what = f"collection {collection!r}" if collection else "the collection"
        return StoreError(
            f"{what} was built with another embedding model ({text}): use the embeddings "
            f"it was built with, or rebuild it with these: {_rebuild_hint(collection)}"
        )
    if "hnsw" in low or "pickle" in low:
        what = f"collection {collection!r}" if collection else "a collection"
        return DamagedStore(
            f"the vector index of {what} in {where} is damaged ({text}): rebuild it with "
            f"{_rebuild_hint(collection)}",
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
            f"again ({_rebuild_hint(collection)} rebuilds a damaged collection)"
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


def _location(target: Any) -> str:
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
def _guard(target: Any, collection: str | None = None) -> Iterator[None]:
    """Chroma calls inside the block fail as a StoreError (see `store_error`)."""
    try:
        yield
    except CragError:
        raise
    except BaseException as exc:  # a PanicException (Chroma's native code) is no Exception
        if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
            raise
        problem = store_error(exc, _location(target), collection)
        if problem is None:
            raise
        raise problem from exc


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
    """`ctx.home` (and the store in it) must be folders, if they exist at all."""
    for path in (ctx.home, ctx.chroma_path):
        if path.exists() and not path.is_dir():
            raise StoreError(
                f"{path} is not a folder: point --home / CRAG_HOME at a folder (crag keeps its "
                "store in HOME/chroma)"
            )


def _client_key(ctx: Context) -> str:
    return f"url:{ctx.chroma_url}" if ctx.chroma_url else f"path:{ctx.chroma_path.resolve()}"


def _drop_system(path: Path) -> None:
    """Forget chromadb's own per-folder system, e.g. one left half-built by a failed open:
    the next client of that folder then starts afresh."""
    with contextlib.suppress(Exception):
        from chromadb.api.shared_system_client import SharedSystemClient

        SharedSystemClient._identifier_to_system.pop(str(path), None)
        SharedSystemClient._identifier_to_refcount.pop(str(path), None)


def open_client(ctx: Context, *, create: bool = False) -> ClientAPI:
    """A Chroma client for `ctx` (server at `ctx.chroma_url`, else `ctx.chroma_path`).

    Cached per location: a persistent client is not cheap to open, and the
    retrieve node calls this once per question. Only a writer (`create`) makes a new
    embedded store: asking a library that was never ingested says so instead.
    """
    key = _client_key(ctx)
    if not ctx.chroma_url:
        check_home(ctx)
        if not create and not (ctx.chroma_path / "chroma.sqlite3").is_file():
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
            except BaseException as exc:  # a PanicException is no Exception
                if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
                    raise
                _drop_system(ctx.chroma_path)
                problem = store_error(exc, str(ctx.chroma_path), ctx.collection)
                raise problem or StoreError(
                    f"cannot open the Chroma store at {ctx.chroma_path}: {exc}"
                ) from exc
        _CLIENTS[key] = client
        return client


def forget_clients() -> None:
    """Drop cached clients (tests that delete a store folder, long-lived servers)."""
    with _CLIENTS_LOCK:
        _CLIENTS.clear()
    _VERIFIED.clear()


def set_aside_store(ctx: Context) -> Path:
    """Move a damaged embedded store out of the way (to HOME/chroma.damaged-TIME), so that
    the next writer starts a new one; returns where it went."""
    with _CLIENTS_LOCK:
        _CLIENTS.pop(_client_key(ctx), None)
    _drop_system(ctx.chroma_path)
    _VERIFIED.clear()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = ctx.chroma_path.with_name(f"{ctx.chroma_path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = ctx.chroma_path.with_name(f"{ctx.chroma_path.name}.damaged-{stamp}-{n}")
    try:
        ctx.chroma_path.rename(target)
        _seal_file(ctx.chroma_path).unlink(missing_ok=True)
    except OSError as exc:
        raise store_error(exc, str(ctx.chroma_path)) or StoreError(str(exc)) from exc
    return target


def get_collection(
    client: ClientAPI, name: str, *, create: bool = False, embeddings: str | None = None
) -> Collection:
    """The collection `name` in cosine space, without a Chroma embedding function.

    With `embeddings`, a new collection records that spec and an existing one
    must have been built with it. The collection's persisted vector index is checked
    (`check_index`) before anything can make Chroma load it.
    """
    from chromadb.errors import InvalidArgumentError, NotFoundError  # see open_client

    check_collection_name(name)
    with _guard(client, name):
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
            problem = store_error(exc, _location(client), name)
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
            with _guard(client, name):
                collection.modify(
                    metadata={**(collection.metadata or {}), EMBEDDINGS_KEY: embeddings}
                )
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
    store = _store_path(client)
    with _guard(client, name):
        try:
            collection = client.get_collection(name, embedding_function=None)  # metadata only
        except NotFoundError:
            collection = None
        if collection is not None and store is not None:
            segment = _vector_segment(store, str(collection.id), name)
            if segment:
                shutil.rmtree(store / segment, ignore_errors=True)
                _VERIFIED.pop(str(store / segment), None)
        if collection is not None:
            client.delete_collection(name)
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


# --- Integrity of the embedded store -----------------------------------------------------------
#
# Chroma keeps each collection's vectors in an HNSW index, persisted in a folder named after
# the collection's vector segment (HOME/chroma/<segment id>/) and loaded by native code that
# trusts those bytes: a damaged file crashes the process (SIGSEGV) with no message. So
# before Chroma may load a collection, crag checks its persisted index:
#
# * After each successful ingest, the size, mtime and sha256 of the index files are
#   recorded next to the store (HOME/chroma.integrity.json: the "seal"). Chroma writes these
#   files only when a write reaches its sync threshold, never on a read (a query leaves
#   them as they are), so the seal stays valid until the next ingest, which removes it
#   before its first write and records a new one at its end.
# * On use, files whose size and mtime match the seal are trusted (a few stat calls). Else
#   their content is checked: equal hashes (a copied store) pass; otherwise, or without a
#   seal (a killed ingest, an older store), the index structure is validated the way
#   Chroma's loader would read it (header, sizes, every neighbour link within range).
#   A structural fault is a DamagedStore error; a changed but well-formed sealed index only
#   logs a warning (another program may have written to the collection).
# * A segment without `index_metadata.pickle` was never persisted as a whole: Chroma
#   rebuilds it from its log on open and reads nothing from those files.

_PERSISTED_MARK = "index_metadata.pickle"
_INDEX_FILES = ("header.bin", "data_level0.bin", "length.bin", "link_lists.bin", _PERSISTED_MARK)
#: chroma-hnswlib's persisted header (header.bin, 100 bytes): version, offsetLevel0,
#: max_elements, cur_element_count, size_data_per_element, label_offset, offsetData,
#: maxlevel, enterpoint_node, maxM, maxM0, M, mult, ef_construction.
_HEADER = struct.Struct("<i6QiI3QdQ")
_SEAL_VERSION = 1
#: folder -> the file signature last found sound in this process.
_VERIFIED: dict[str, tuple[tuple[str, int, int], ...]] = {}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: collection id -> its vector segment's id (fixed for the collection's life).
_SEGMENTS: dict[str, str] = {}


def _store_path(client: Any) -> Path | None:
    """The folder of an embedded (persistent) client; None for a server's client."""
    try:
        settings = client.get_settings()
    except Exception:
        return None
    if not settings.is_persistent or not settings.persist_directory:
        return None
    if not str(settings.chroma_api_impl or "").endswith(("RustBindingsAPI", "SegmentAPI")):
        return None
    return Path(settings.persist_directory)


def _seal_file(store: Path) -> Path:
    return store.with_name(store.name + ".integrity.json")


def _vector_segment(store: Path, collection_id: str, name: str | None = None) -> str | None:
    """The id of a collection's vector segment (its index folder), read from Chroma's
    database without Chroma (read-only)."""
    if collection_id in _SEGMENTS:
        return _SEGMENTS[collection_id]
    uri = (store.resolve() / "chroma.sqlite3").as_uri() + "?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as db:
            row = db.execute(
                "SELECT id FROM segments WHERE collection = ? AND scope = 'VECTOR'",
                (collection_id,),
            ).fetchone()
    except sqlite3.Error as exc:
        raise store_error(exc, str(store), name) or StoreError(str(exc)) from exc
    if not row:
        return None
    _SEGMENTS[collection_id] = str(row[0])
    return str(row[0])


def _signature(folder: Path) -> tuple[tuple[str, int, int], ...]:
    out = []
    for name in _INDEX_FILES:
        try:
            st = (folder / name).stat()
        except FileNotFoundError:
            continue
        out.append((name, st.st_size, st.st_mtime_ns))
    return tuple(out)


def _same_content(folder: Path, files: dict[str, tuple[int, int, str]]) -> bool:
    try:
        return _digests(folder) == {f: v[2] for f, v in files.items()}
    except OSError:
        return False


def _digests(folder: Path) -> dict[str, str]:
    out = {}
    for name in _INDEX_FILES:
        path = folder / name
        if path.is_file():
            with path.open("rb") as fh:
                out[name] = hashlib.file_digest(fh, "sha256").hexdigest()
    return out


def index_problem(folder: Path, *, id_map: bool = True) -> str | None:
    """What is wrong with the persisted HNSW index in `folder`, as Chroma's native loader
    would read it; None if it is sound (or was never persisted: nothing is loaded then).
    `id_map=False` skips walking the id map (a pickle Chroma parses safely itself)."""
    try:
        problem = _index_problem(folder)
        if problem is None and id_map:
            problem = _pickle_problem(folder / _PERSISTED_MARK)
        return problem
    except (OSError, ValueError, struct.error) as exc:
        return f"unreadable: {exc}"


def _index_problem(folder: Path) -> str | None:
    import numpy as np  # a dependency of chromadb

    if not (folder / _PERSISTED_MARK).is_file():
        return None
    missing = [n for n in _INDEX_FILES if not (folder / n).is_file()]
    if missing:
        return f"{', '.join(missing)} missing"
    raw = (folder / "header.bin").read_bytes()
    if len(raw) < _HEADER.size:
        return f"header.bin has {len(raw)} bytes, not {_HEADER.size}"
    (version, offset0, capacity, n, stride, label_at, data_at, max_level, entry) = (
        _HEADER.unpack_from(raw)[:9]
    )
    max_m, max_m0, m = _HEADER.unpack_from(raw)[9:12]
    if (
        version != 1
        or offset0 != 0
        or capacity < n
        or not 0 < max_m <= max_m0 <= 1 << 16
        or m == 0
        or data_at != 4 + 4 * max_m0
        or label_at <= data_at
        or (label_at - data_at) % 4
        or label_at + 8 != stride
        or (n > 0 and not (entry < n and 0 <= max_level < 64))
    ):
        return "header.bin does not describe an index"
    size = (folder / "data_level0.bin").stat().st_size
    if size < n * stride:
        return f"data_level0.bin has {size} bytes, {n} vectors need {n * stride}"
    if (folder / "length.bin").stat().st_size < 4 * n:
        return "length.bin is truncated"
    if n == 0:
        return None

    # level 0: per vector, a neighbour count (low 16 bits of a u32), maxM0 links, the
    # vector, its u64 label
    rows = np.memmap(folder / "data_level0.bin", dtype=np.uint8, mode="r", shape=(n, stride))
    head = np.ascontiguousarray(rows[:, :data_at]).view("<u4")
    degree = head[:, 0] & 0xFFFF
    if int(degree.max()) > max_m0:
        return f"data_level0.bin: a vector has {int(degree.max())} neighbours (at most {max_m0})"
    used = np.arange(max_m0) < degree[:, None]
    if (head[:, 1:][used] >= n).any():
        return f"data_level0.bin: a neighbour link points past the {n} stored vectors"
    labels = np.sort(np.ascontiguousarray(rows[:, label_at:stride]).view("<u8").ravel())
    if (labels[1:] == labels[:-1]).any():
        return "data_level0.bin: two vectors share a label"
    del rows, head

    # upper levels: per vector, a u32 byte count, then that many bytes of (u32 count,
    # maxM links) blocks, one per level above 0
    words = np.fromfile(folder / "link_lists.bin", dtype="<u4")
    block = 1 + max_m
    starts: list[int] = []
    at = 0
    total = len(words)
    sizes = words.tolist()
    for _ in range(n):
        if at >= total:
            return "link_lists.bin is truncated"
        nbytes = sizes[at]
        at += 1
        if nbytes:
            levels, rest = divmod(nbytes, 4 * block)
            if rest or levels > max_level or at + nbytes // 4 > total:
                return "link_lists.bin: a vector's upper levels are garbled"
            starts.extend(range(at, at + levels * block, block))
            at += nbytes // 4
    if starts:
        blocks = words[np.asarray(starts)[:, None] + np.arange(block)]
        if int(blocks[:, 0].max()) > max_m:
            return f"link_lists.bin: a vector has more than {max_m} upper-level neighbours"
        used = np.arange(max_m) < blocks[:, :1]
        if (blocks[:, 1:][used] >= n).any():
            return f"link_lists.bin: a neighbour link points past the {n} stored vectors"
    return None


def _pickle_problem(path: Path) -> str | None:
    """Chroma's id map is a pickle: walked opcode by opcode (never unpickled), it must end
    where the file does."""
    import pickletools

    data = path.read_bytes()
    end: int | None = None
    try:
        for _op, _arg, end in pickletools.genops(data):  # noqa: B007 - the last position
            pass
    except Exception:
        return f"{path.name} is garbled"
    if end is None or end + 1 != len(data):
        return f"{path.name} is garbled"
    return None


def _read_seals(store: Path) -> dict[str, Any]:
    try:
        data = json.loads(_seal_file(store).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.debug("ignoring unreadable %s: %s", _seal_file(store), exc)
        return {}
    if not isinstance(data, dict) or data.get("version") != _SEAL_VERSION:
        return {}
    seals = data.get("collections")
    return seals if isinstance(seals, dict) else {}


def _write_seals(store: Path, seals: dict[str, Any]) -> None:
    path = _seal_file(store)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(
            json.dumps({"version": _SEAL_VERSION, "collections": seals}, indent=1) + "\n",
            encoding="utf-8",
        )
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        log.warning("could not record the index checksums in %s: %s", path, exc)


def check_index(client: ClientAPI, collection: Collection, name: str) -> None:
    """Refuse (DamagedStore) a collection whose persisted vector index would crash Chroma."""
    store = _store_path(client)
    if store is None:
        return
    seal = _read_seals(store).get(name)
    if (
        isinstance(seal, dict)
        and seal.get("collection") == str(collection.id)
        and _UUID.fullmatch(str(seal.get("segment")))
    ):
        segment = seal.get("segment")
    else:
        seal = None
        segment = _vector_segment(store, str(collection.id), name)
    if not segment:
        return
    folder = store / str(segment)
    if not (folder / _PERSISTED_MARK).is_file():
        return
    signature = _signature(folder)
    if _VERIFIED.get(str(folder)) == signature:
        return
    files = _sealed_files(seal)
    sealed = tuple((f, *files[f][:2]) for f in _INDEX_FILES if f in files) if files else None
    if signature != sealed:
        if files and _same_content(folder, files):
            pass  # the same bytes with other dates: a copied store
        else:
            # Changed since sealed: a damaged id map would only be warned about, so walk it.
            deep = bool(files)
            problem = index_problem(folder, id_map=deep)
            for _ in range(3):  # an ingest persisting the index meanwhile: read it again
                if not problem or _signature(folder) == signature:
                    break
                time.sleep(0.2)
                signature = _signature(folder)
                problem = index_problem(folder, id_map=deep)
            if problem:
                raise DamagedStore(
                    f"the vector index of collection {name!r} in {folder} is damaged ({problem}):"
                    f" rebuild it with {_rebuild_hint(name)}",
                    part="index",
                    collection=name,
                )
            if files:
                log.warning(
                    "the vector index of collection %r in %s changed since the last `crag "
                    "ingest` (another program wrote to it?); if answers look wrong, rebuild it "
                    "with %s",
                    name,
                    folder,
                    _rebuild_hint(name),
                )
    _VERIFIED[str(folder)] = signature


def _sealed_files(seal: Any) -> dict[str, tuple[int, int, str]] | None:
    """A seal's files as {name: (size, mtime_ns, sha256)}; None if it records none (or is
    not one crag wrote)."""
    try:
        files = {str(f): (int(v[0]), int(v[1]), str(v[2])) for f, v in dict(seal["files"]).items()}
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    return files or None


def seal(client: ClientAPI, collection: Collection, name: str) -> str | None:
    """Record the collection's index files (after an ingest): what `check_index` trusts.
    Returns what is wrong with the index instead if it is damaged (nothing is recorded)."""
    store = _store_path(client)
    if store is None:
        return None
    segment = _vector_segment(store, str(collection.id), name)
    if not segment:
        return None
    folder = store / segment
    entry: dict[str, Any] = {"collection": str(collection.id), "segment": segment, "files": {}}
    if (folder / _PERSISTED_MARK).is_file():
        before = _signature(folder)
        problem = index_problem(folder)
        if problem:
            return problem
        digests = _digests(folder)
        if _signature(folder) != before:
            return None  # written meanwhile: leave it unsealed
        entry["files"] = {f: [size, mtime, digests[f]] for f, size, mtime in before}
        _VERIFIED[str(folder)] = before
    seals = _read_seals(store)
    seals[name] = entry
    _write_seals(store, seals)
    return None


def unseal(client: ClientAPI, name: str) -> None:
    """Forget the recorded index files of `name` (before an ingest writes to it)."""
    store = _store_path(client)
    if store is None:
        return
    seals = _read_seals(store)
    if seals.pop(name, None) is not None:
        _write_seals(store, seals)


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
    embedder = embeddings_for(ctx)
    vector: Sequence[float] = embedder.embed_query(query)
    dimension = getattr(getattr(collection, "_model", None), "dimension", None)
    if isinstance(dimension, int) and dimension != len(vector):
        raise StoreError(
            f"collection {collection_name!r} holds {dimension}-dimensional vectors, but "
            f"embeddings {ctx.embeddings!r} give {len(vector)}: ask with the embeddings it was "
            f"built with, or rebuild it with these: {_rebuild_hint(collection_name)}"
        )
    # Over-fetch, then cut: the approximate index misses fewer true top-k this way.
    with _guard(collection, collection_name):
        result = collection.query(
            query_embeddings=[vector],
            n_results=max(4 * k, 20),
            where=_both(where, tenant_where(collection, ctx.tenant)),
            include=["documents", "metadatas", "distances", "embeddings"],
        )
    ids = result["ids"][0] if result["ids"] else []
    docs = (result.get("documents") or [[]])[0]
    metas = (result.get("metadatas") or [[]])[0]
    dists = (result.get("distances") or [[]])[0]
    mine = [i for i in range(len(ids)) if belongs(metas[i], collection, ctx.tenant)]
    if len(mine) < len(ids):  # a tenant's first ingest running meanwhile, or another writer
        log.debug("dropped %d chunk(s) of other tenants from a query", len(ids) - len(mine))
    vectors = result.get("embeddings")
    if vectors is not None and len(vectors):
        # The grader will score these chunks next: spare it re-running the model.
        embedder.remember([docs[i] or "" for i in mine], [vectors[0][i] for i in mine])
    order = sorted(mine, key=lambda i: (dists[i], ids[i]))[:k]
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
    """What the tenant's part of a collection holds: chunk count, files, embeddings spec."""
    records = list(tenant_records(ctx, collection_name))
    collection = get_collection(open_client(ctx), collection_name)
    return {
        "collection": collection_name,
        "tenant": ctx.tenant,
        "location": ctx.chroma_url or str(ctx.chroma_path),
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
        with _guard(collection, collection.name):
            got = collection.get(include=include, limit=page, offset=offset, where=where)
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
    with _guard(collection, collection.name):
        collection.upsert(
            ids=list(ids),
            embeddings=list(vectors),
            documents=list(texts),
            metadatas=list(metadatas),
        )


def delete(collection: Collection, ids: Sequence[str]) -> None:
    for start in range(0, len(ids), _DELETE_BATCH):
        with _guard(collection, collection.name):
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
        with _guard(collection, collection.name):
            got = collection.get(where=where, include=["embeddings", "metadatas"])
        embeddings = got.get("embeddings")
        if embeddings is None:
            continue
        for meta, vector in zip(got.get("metadatas") or [], embeddings, strict=False):
            if meta and meta.get(key) not in known:
                known[str(meta[key])] = [float(x) for x in vector]
    return known


def _version_key(tenant: str) -> str:
    return f"{VERSION_KEY}:{tenant}"


def mark_changed(collection: Collection, tenant: str) -> None:
    """Give the tenant's part of the collection a new version: what was derived from its
    text (the coverage index, cached answers) is stale. The collection's own version
    changes too."""
    version = uuid.uuid4().hex
    with _guard(collection, collection.name):
        collection.modify(
            metadata={
                **(collection.metadata or {}),
                VERSION_KEY: version,
                _version_key(tenant): version,
            }
        )


def library_version(ctx: Context, collection_name: str) -> str:
    """Changes whenever the tenant's chunks in the collection do (for the default tenant
    of a collection written before tenants, the collection's version, or its chunk count
    before versions were kept)."""
    collection = get_collection(open_client(ctx), collection_name)
    metadata = collection.metadata or {}
    version = metadata.get(_version_key(ctx.tenant))
    if version:
        return str(version)
    if ctx.tenant != DEFAULT_TENANT or not _untagged(collection):
        return "empty"  # the tenant never ingested into this collection
    if metadata.get(VERSION_KEY):
        return str(metadata[VERSION_KEY])
    with _guard(collection, collection_name):
        return f"count:{collection.count()}"


# --- tenants ---------------------------------------------------------------------------------


def _untagged(collection: Collection) -> bool:
    """A collection written before tenants existed: its chunks name no tenant."""
    return not (collection.metadata or {}).get(TENANTS_KEY)


def tenants_of(collection: Collection) -> set[str]:
    """The tenants that ever wrote to the collection (each records a version before its
    first chunk is written)."""
    prefix = _version_key("")
    return {k[len(prefix) :] for k in collection.metadata or {} if k.startswith(prefix)}


def tenant_where(collection: Collection, tenant: str) -> dict[str, Any] | None:
    """The filter that keeps `tenant`'s chunks in queries, or None where it would keep
    every chunk: for the default tenant of a collection written before tenants, and for
    the only tenant that ever wrote to the collection (a filter that matches every chunk
    makes a query 10-20 times slower). `belongs` checks every hit either way."""
    if _untagged(collection):
        return None if tenant == DEFAULT_TENANT else {TENANT_KEY: tenant}
    if tenants_of(collection) == {tenant}:
        return None
    return {TENANT_KEY: tenant}


def belongs(metadata: Mapping[str, Any] | None, collection: Collection, tenant: str) -> bool:
    """Whether a chunk with this metadata is `tenant`'s."""
    owner = (metadata or {}).get(TENANT_KEY)
    if owner is None:  # only in a collection written before tenants: the default's
        return tenant == DEFAULT_TENANT and _untagged(collection)
    return owner == tenant


def _both(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    if a and b:
        return {"$and": [a, b]}
    return a or b


def tenant_records(
    ctx: Context, collection_name: str, *, texts: bool = False, page: int = 5000
) -> Iterator[Record]:
    """Every chunk of the run's tenant in a collection, read in pages."""
    collection = get_collection(open_client(ctx), collection_name)
    where = tenant_where(collection, ctx.tenant)
    for record in iter_records(collection, texts=texts, page=page, where=where):
        if belongs(record.metadata, collection, ctx.tenant):
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
        with _guard(collection, collection.name):
            collection.update(ids=ids, metadatas=[{TENANT_KEY: DEFAULT_TENANT}] * len(ids))
    marks: dict[str, Any] = {TENANTS_KEY: True}
    if untagged and not metadata.get(_version_key(DEFAULT_TENANT)):  # see `tenants_of`
        marks[_version_key(DEFAULT_TENANT)] = metadata.get(VERSION_KEY) or uuid.uuid4().hex
    with _guard(collection, collection.name):
        collection.modify(metadata={**metadata, **marks})
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
