"""The embedded store's vector indexes, checked before Chroma loads them.

Chroma's native loader trusts the persisted bytes: a damaged file crashes the whole
process. The notes below say how crag seals and checks each collection's index.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import sqlite3
import struct
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crag.errors import DamagedStore, StoreError
from crag.retrieval.store_errors import rebuild_hint, store_error

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

log = logging.getLogger(__name__)


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


def forget_verified(folder: Path | None = None) -> None:
    """Forget that `folder` (every folder: None) was found sound: check it again."""
    if folder is None:
        _VERIFIED.clear()
    else:
        _VERIFIED.pop(str(folder), None)


def store_path(client: Any) -> Path | None:
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


def seal_file(store: Path) -> Path:
    return store.with_name(store.name + ".integrity.json")


def vector_segment(store: Path, collection_id: str, name: str | None = None) -> str | None:
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
        data = json.loads(seal_file(store).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.debug("ignoring unreadable %s: %s", seal_file(store), exc)
        return {}
    if not isinstance(data, dict) or data.get("version") != _SEAL_VERSION:
        return {}
    seals = data.get("collections")
    return seals if isinstance(seals, dict) else {}


def _write_seals(store: Path, seals: dict[str, Any]) -> None:
    path = seal_file(store)
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
    store = store_path(client)
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
        segment = vector_segment(store, str(collection.id), name)
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
                    f" rebuild it with {rebuild_hint(name)}",
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
                    rebuild_hint(name),
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
    store = store_path(client)
    if store is None:
        return None
    segment = vector_segment(store, str(collection.id), name)
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
    store = store_path(client)
    if store is None:
        return
    seals = _read_seals(store)
    if seals.pop(name, None) is not None:
        _write_seals(store, seals)


def intact_seal(store: Path, name: str) -> dict[str, Any] | None:
    """The seal of collection `name` if its index files are as sealed (sizes and dates):
    then no ingest has written to it since (every write unseals first) and nothing has
    touched its index. None otherwise."""
    entry = _read_seals(store).get(name)
    if not isinstance(entry, dict) or not _UUID.fullmatch(str(entry.get("segment"))):
        return None
    files = _sealed_files(entry) or {}
    folder = store / str(entry["segment"])
    if not (folder / _PERSISTED_MARK).is_file():  # not persisted yet: Chroma loads nothing
        return None if files else entry
    sealed = tuple((f, *files[f][:2]) for f in _INDEX_FILES if f in files)
    return entry if _signature(folder) == sealed else None
