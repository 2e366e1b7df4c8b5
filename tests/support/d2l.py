"""The part of the d2l dev library that the end-to-end tests read, and how it is built
(once per test session: conftest.py's `d2l_library`)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fakes import CountingEmbeddings

#: The part of the d2l library the end-to-end tests read: two whole books, and the
#: chapters (1-based pages, each book's title page first) and external pages that the
#: graph's questions are about. The whole library took minutes to ingest; this, one.
D2L_BOOKS: dict[str, tuple[int, ...] | None] = {
    "02_multilayer_perceptrons.pdf": None,
    "05_natural_language_processing.pdf": None,
    "03_convolutional_networks_vision.pdf": (1, *range(26, 54)),  # batch norm, dropout
    "06_optimization_performance.pdf": (1, *range(24, 44)),  # AdaGrad, Adam, schedules
    "07_mathematics_appendix.pdf": (1, *range(60, 81)),  # bias and variance
}
D2L_EXTERNAL = (
    "d2l_layer_normalization.md",
    "d2l_transformer_add_and_norm.md",
    "sklearn_learning_curve.md",
    "sklearn_ensemble.md",
    *(f"rgb_en_fact_q{i:03d}.md" for i in range(8)),
)


@dataclass(frozen=True)
class IngestedLibrary:
    home: Path  # CRAG_HOME with the `books` and `external` collections
    books: Path  # the folder of PDFs that was ingested
    embedded: int  # texts the embedder was given while ingesting the books


def ingest_d2l(eval_dir: Path, root: Path) -> dict[str, Any]:
    from pypdf import PdfReader, PdfWriter

    from crag.context import Context
    from crag.ingest.indexer import ingest_path
    from crag.models.embeddings import make_embeddings

    books, external = root / "books", root / "external"
    books.mkdir(parents=True)
    external.mkdir()
    for name, pages in D2L_BOOKS.items():
        if pages is None:
            shutil.copy(eval_dir / "books" / name, books / name)
            continue
        reader, writer = PdfReader(eval_dir / "books" / name), PdfWriter()
        for page in pages:
            writer.add_page(reader.pages[page - 1])
        writer.write(books / name)
    for name in D2L_EXTERNAL:
        shutil.copy(eval_dir / "external" / name, external / name)
    ctx = Context(home=root / "home")
    counting = CountingEmbeddings(make_embeddings("local"))
    result = ingest_path(ctx, books, collection="books", embeddings=counting)
    assert result.exit_code == 0, result.to_dict()
    embedded = counting.texts
    result = ingest_path(ctx, external, collection="external", embeddings=counting)
    assert result.exit_code == 0, result.to_dict()
    return {"embedded": embedded}
