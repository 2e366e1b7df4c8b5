"""Shared fixtures: an offline environment, the evaluation data, fake embeddings.

Tests never reach the network: tracing, Hugging Face and LangGraph analytics are
switched off for the whole session, and the store/ingest `CRAG_*` variables of
the caller's shell are dropped so a developer's own `CRAG_HOME` or
`CRAG_CHROMA_URL` cannot leak into a test.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings

import crag.offline

OFFLINE_ENV = crag.offline.OFFLINE_ENV
#: Store and ingest knobs that would redirect a test's reads and writes.
DROPPED_ENV = (
    "CRAG_HOME",
    "CRAG_CHROMA_URL",
    "CRAG_COLLECTION",
    "CRAG_EXTERNAL_COLLECTION",
    "CRAG_EMBEDDINGS",
    "CRAG_CHUNK_SIZE",
    "CRAG_CHUNK_OVERLAP",
)


@pytest.fixture(scope="session", autouse=True)
def offline_env() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        for key, value in OFFLINE_ENV.items():
            mp.setenv(key, value)
        for key in DROPPED_ENV:
            mp.delenv(key, raising=False)
        yield


def _missing(what: str) -> None:
    """Without the evaluation data a test cannot run: in CI that is a failure, not a
    skip (a silent skip would pass a suite that tested nothing); elsewhere, a skip."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} (CI must have the evaluation data)", pytrace=False)
    pytest.skip(what)


@pytest.fixture(scope="session")
def eval_dir() -> Path:
    """The evaluation set, read in place from the repository's sibling `../shared/eval`."""
    path = Path(__file__).resolve().parents[1].parent / "shared" / "eval"
    if not (path / "questions.jsonl").is_file():
        _missing(f"evaluation data not found at {path} (expected next to the repository)")
    return path


@pytest.fixture(scope="session")
def books_dir(eval_dir: Path) -> Path:
    path = eval_dir / "books"
    if not any(path.glob("*.pdf")):
        _missing(f"no books in {path}")
    return path


class FakeEmbeddings(Embeddings):
    """Deterministic bag-of-words vectors: fast, and similar texts stay similar.

    Counts calls and texts so tests can assert that no embedding work was done.
    `fail_after` raises `error` once that many texts have been embedded.
    """

    def __init__(
        self,
        dim: int = 64,
        *,
        fail_after: int | None = None,
        error: BaseException | None = None,
    ) -> None:
        self.dim = dim
        self.fail_after = fail_after
        self.error = error or RuntimeError("embedder failed (simulated)")
        self.calls = 0
        self.texts = 0
        self._lock = threading.Lock()

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * self.dim
        for word in text.lower().split():
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big")
            vec[h % self.dim] += 1.0
        norm = math.sqrt(sum(x * x for x in vec)) or 1.0
        return [x / norm for x in vec]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            if self.fail_after is not None and self.texts + len(texts) > self.fail_after:
                raise self.error
            self.calls += 1
            self.texts += len(texts)
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


@pytest.fixture
def fake_embeddings() -> Callable[..., FakeEmbeddings]:
    """Factory: `fake_embeddings(fail_after=10, error=KeyboardInterrupt())`."""
    return FakeEmbeddings


def build_pdf(
    pages: list[str],
    *,
    title: str | None = None,
    labels: list[tuple[int, str, int]] | None = None,
) -> bytes:
    """A small text PDF (fpdf2); `labels`: (first page index, "/r" | "/D" ..., start)."""
    import io

    from fpdf import FPDF
    from pypdf import PdfReader, PdfWriter

    pdf = FPDF()
    if title:
        pdf.set_title(title)
    for text in pages:
        pdf.add_page()
        pdf.set_font("helvetica", size=11)
        if text:
            pdf.multi_cell(0, 5, text)
    data = bytes(pdf.output())
    if not labels:
        return data
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    bounds = [first for first, _, _ in labels[1:]] + [len(pages)]
    for (first, style, start), end in zip(labels, bounds, strict=True):
        writer.set_page_label(first, end - 1, style=style, start=start)  # type: ignore[arg-type]
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.fixture
def make_pdf() -> Callable[..., bytes]:
    return build_pdf
