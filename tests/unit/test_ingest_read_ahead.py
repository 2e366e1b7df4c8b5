"""The next PDF read by a helper process while the current file is embedded."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from crag.ingest.chunking import chunker_signature
from crag.ingest.loaders import LoadError, read_bytes, sha256_hex
from crag.ingest.prefetch import ReadAhead, load_and_chunk
from crag.ingest.stored import Stored, file_version

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "library"
CHUNKER = chunker_signature(900, 150)


@pytest.fixture
def ahead() -> Iterator[ReadAhead]:
    reader = ReadAhead(900, 150)
    yield reader
    reader.close()


def test_a_pdf_read_ahead_is_what_this_process_reads(ahead: ReadAhead) -> None:
    pdf = SAMPLES / "01_lumen_installation_guide.pdf"
    ahead.start(pdf, Stored(), CHUNKER)
    assert ahead._ahead is not None
    helper = ahead._ahead[2]
    doc, chunks = ahead.load(pdf, read_bytes(pdf))
    assert helper.done() and ahead._ahead is None
    here = load_and_chunk(pdf, read_bytes(pdf), 900, 150)
    assert (doc.title, doc.pages, doc.page_count) == (here[0].title, here[0].pages, 3)
    assert [c.text for c in chunks] == [c.text for c in here[1]] and chunks


def test_changed_bytes_are_read_again_here(ahead: ReadAhead, tmp_path: Path) -> None:
    first, second = sorted(SAMPLES.glob("*.pdf"))[:2]
    path = tmp_path / "book.pdf"
    shutil.copy(first, path)
    ahead.start(path, Stored(), CHUNKER)
    shutil.copy(second, path)  # replaced after it was read ahead
    doc, _ = ahead.load(path, read_bytes(path))
    assert doc.pages == load_and_chunk(second, read_bytes(second), 900, 150)[0].pages


def test_a_pdf_stored_complete_or_not_a_pdf_is_not_read_ahead(
    ahead: ReadAhead, tmp_path: Path
) -> None:
    pdf = SAMPLES / "02_lumen_api_rate_limits.pdf"
    version = file_version(sha256_hex(read_bytes(pdf)), CHUNKER)
    ahead.start(pdf, Stored(ids={"a": (version, 1)}), CHUNKER)
    note = tmp_path / "note.md"
    note.write_text("# A note\n\nNot a PDF.\n")
    ahead.start(note, Stored(), CHUNKER)
    assert ahead._ahead is None and ahead._pool is None


def test_a_pdf_the_helper_cannot_read_raises_the_same_error(
    ahead: ReadAhead, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.7\n" + os.urandom(2000))
    ahead.start(bad, Stored(), CHUNKER)
    assert ahead._ahead is not None
    with pytest.raises(LoadError) as raised:
        ahead.load(bad, read_bytes(bad))
    assert raised.value.path == bad and raised.value.reason.startswith("corrupt PDF")
    assert ahead._pool is not None  # raised by the helper, not read again here after it broke
