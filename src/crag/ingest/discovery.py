"""Which files an ingest reads: the supported files under a path, hidden ones skipped."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from crag.errors import IngestError
from crag.ingest.loaders import SUPPORTED, kind_of


@dataclass
class Discovery:
    root: Path  # the path walked: sources are relative to it, after `prefix`
    files: list[Path]
    errors: list[tuple[str, str]]  # (folder, reason) for folders that could not be listed
    #: Where `root` lies in the folder the collection first knew it by ("" when it is
    #: that folder): a subfolder's files keep the names the whole folder gives them.
    prefix: str = ""

    def source(self, path: Path) -> str:
        rel = path.relative_to(self.root).as_posix()
        return f"{self.prefix}/{rel}" if self.prefix else rel

    @property
    def library(self) -> str:
        """The folder the sources are named from, as an absolute path."""
        top = self.root.resolve()
        for _ in self.prefix.split("/") if self.prefix else ():
            top = top.parent
        return str(top)

    def within(self, libraries: Iterable[str]) -> Discovery:
        """The same files named from the folder of `libraries` (earlier ingests' folders)
        that holds `root`, if one does: `crag ingest books/sub` after `crag ingest books`
        names sub's files "sub/...", as the whole folder did, not anew."""
        top = self.root.resolve()
        holders = [Path(f) for f in libraries if top != Path(f) and top.is_relative_to(f)]
        if self.prefix or not holders:
            return self
        prefix = top.relative_to(min(holders, key=lambda f: len(f.parts))).as_posix()
        errors = [
            (where if where == str(self.root) else f"{prefix}/{where}", why)
            for where, why in self.errors
        ]
        return replace(self, errors=errors, prefix=prefix)


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
