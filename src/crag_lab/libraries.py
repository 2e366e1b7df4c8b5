"""Evaluation libraries: a labelled question set together with the library it asks about.

A library folder holds `questions.jsonl` and optionally `grader_pairs.jsonl`, `books/`
(ingested as the library) and `external/` (the offline stand-in for web search), as
`eval/d2l` does. Each library gets a home of its own under the eval home, so two
libraries never share a collection, a trained grader or settings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from crag.context import Context
from crag.ingest.indexer import ingest_path

QUESTIONS = "questions.jsonl"
PAIRS = "grader_pairs.jsonl"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class Library:
    """One evaluation library: its name, its labelled files and the home it is read from."""

    name: str
    questions: Path
    pairs: Path | None
    books: Path | None
    external: Path | None
    home: Path

    def context(self, ctx: Context) -> Context:
        """`ctx` reading this library (its home, with that home's settings)."""
        return ctx.with_overrides(home=self.home)


def parse(spec: str, eval_home: Path) -> Library:
    """`[NAME=]FOLDER`: a library folder, named by NAME or the folder's name, with its
    home at `eval_home/NAME`. A ValueError says what is missing."""
    name, sep, where = spec.partition("=")
    if not sep:
        name, where = "", spec
    folder = Path(where).expanduser()
    if not folder.exists():
        raise ValueError(f"{where}: no such file or folder")
    if not folder.is_dir():
        raise ValueError(f"{spec}: not a folder (a library folder holds {QUESTIONS})")
    if not (folder / QUESTIONS).is_file():
        raise ValueError(f"{folder}: is a folder without {QUESTIONS} (give a questions file)")
    name = name or folder.resolve().name
    if not _NAME.fullmatch(name):
        raise ValueError(f"{spec}: the name {name!r} is not a plain name (letters, digits, ._-)")

    def optional(path: Path) -> Path | None:
        return path if path.exists() else None

    return Library(
        name=name,
        questions=folder / QUESTIONS,
        pairs=optional(folder / PAIRS),
        books=optional(folder / "books"),
        external=optional(folder / "external"),
        home=eval_home / name,
    )


def parse_all(specs: list[str], eval_home: Path) -> list[Library]:
    libraries = [parse(spec, eval_home) for spec in specs]
    names = [lib.name for lib in libraries]
    if len(set(names)) != len(names):
        raise ValueError(f"two libraries share a name ({', '.join(names)}): name them NAME=FOLDER")
    return libraries


def ingest(library: Library, ctx: Context) -> list[str]:
    """Ingest the library's books and external corpus into its home (incremental: an
    unchanged file costs a hash). Returns one line per collection, for the progress log;
    a file that fails is an error, since a partial library would skew every figure."""
    lines = []
    lctx = library.context(ctx)
    for folder, collection in (
        (library.books, lctx.store.collection),
        (library.external, "external"),
    ):
        if folder is None:
            continue
        summary = ingest_path(lctx, folder, collection=collection)
        if summary.exit_code != 0:
            failed = "; ".join(
                f"{f['source']}: {f['reason']}" for f in summary.to_dict()["failures"]
            )
            raise ValueError(
                f"{library.name}: ingesting {folder} failed ({summary.error or failed})"
            )
        lines.append(
            f"{library.name}: {collection} ← {folder} ({summary.files_ok} files indexed, "
            f"{summary.files_unchanged} unchanged, {summary.chunks_embedded} chunks embedded)"
        )
    return lines
