"""Which files an ingest reads: the supported files under a path, hidden ones skipped."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from crag.errors import IngestError
from crag.ingest.loaders import SUPPORTED, kind_of


@dataclass
class Discovery:
    root: Path  # sources are relative to this
    files: list[Path]
    errors: list[tuple[str, str]]  # (folder, reason) for folders that could not be listed

    def source(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


def _utf8(name: str) -> bool:
    """Whether a file name can be stored: the store keeps names as UTF-8 text."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _within(folder: Path, top: Path) -> bool:
    """A link to a folder of the tree itself: its files are read under their own names."""
    return folder.is_symlink() and folder.resolve().is_relative_to(top)


def discover(path: Path) -> Discovery:
    """The supported files under `path` (or `path` itself), sorted; hidden entries skipped,
    linked folders outside the tree followed (each once)."""
    path = Path(path).expanduser()
    kinds = ", ".join(sorted(SUPPORTED))
    if not path.exists():
        raise IngestError(f"{path}: no such file or folder", exit_code=2)
    if path.is_file():
        if kind_of(path) is None:
            raise IngestError(
                f"{path}: unsupported file type {path.suffix or '(none)'!r} (crag ingests {kinds})",
                exit_code=2,
            )
        return Discovery(path.parent, [path], [])
    if not path.is_dir():
        raise IngestError(f"{path}: not a regular file or folder", exit_code=2)

    files: list[Path] = []
    errors: list[tuple[str, str]] = []

    def onerror(exc: OSError) -> None:
        where = Path(exc.filename or path)
        rel = where.relative_to(path).as_posix() if where != path else str(path)
        errors.append((rel, f"cannot list folder: {exc.strerror or exc}"))

    top = path.resolve()
    seen: set[tuple[int, int]] = set()  # folders walked, so a loop of links ends
    for dirpath, dirnames, filenames in os.walk(path, onerror=onerror, followlinks=True):
        try:
            here = os.stat(dirpath)
        except OSError as exc:
            onerror(exc)
            dirnames[:] = []
            continue
        if (here.st_dev, here.st_ino) in seen:
            dirnames[:] = []
            continue
        seen.add((here.st_dev, here.st_ino))
        dirnames[:] = sorted(
            d for d in dirnames if not d.startswith(".") and not _within(Path(dirpath) / d, top)
        )
        for name in sorted(filenames):
            candidate = Path(dirpath) / name
            if name.startswith(".") or not kind_of(candidate):
                continue
            rel = candidate.relative_to(path).as_posix()
            if not _utf8(rel):
                shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                errors.append((shown, "its name is not valid UTF-8: rename it to ingest it"))
            elif candidate.is_file():
                files.append(candidate)
            elif candidate.is_symlink():  # dangling, or a loop of links
                errors.append((rel, "broken symbolic link (its target is missing or a loop)"))
    if not files and not errors:
        raise IngestError(f"{path}: no documents to ingest (looked for {kinds} files)")
    return Discovery(path, files, errors)
