"""Test doubles shared by every test folder (on the pytest pythonpath, so a folder's
own conftest.py cannot shadow them): fake embeddings and small PDFs."""

from __future__ import annotations

import hashlib
import math
import threading

from langchain_core.embeddings import Embeddings


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
        if self.fail_after is not None and self.texts >= self.fail_after:
            raise self.error
        return self._vector(text)


class CountingEmbeddings(Embeddings):
    """A real embedder that counts the texts it is given to embed."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.texts = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


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
