"""The next PDF read by a helper process while the current file is embedded."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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
    assert ahead._ahead is not None and ahead._helper is not None
    doc, chunks = ahead.load(pdf, read_bytes(pdf))
    assert ahead._ahead is None and ahead._helper.poll() is None  # read there, still serving
    here = load_and_chunk(pdf, read_bytes(pdf), 900, 150)
    assert (doc.title, doc.pages, doc.page_count) == (here[0].title, here[0].pages, 3)
    assert [c.text for c in chunks] == [c.text for c in here[1]] and chunks


def test_a_helper_that_died_leaves_the_file_to_this_process(ahead: ReadAhead) -> None:
    pdf = SAMPLES / "03_lumen_billing_refunds.pdf"
    ahead.start(pdf, Stored(), CHUNKER)
    assert ahead._helper is not None
    ahead._helper.kill()
    doc, _ = ahead.load(pdf, read_bytes(pdf))
    assert ahead._helper is None
    assert doc.pages == load_and_chunk(pdf, read_bytes(pdf), 900, 150)[0].pages


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
    assert ahead._ahead is None and ahead._helper is None


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
    assert ahead._helper is not None  # raised by the helper, which serves on


def test_a_script_without_a_main_guard_ingests_with_the_helper(tmp_path: Path) -> None:
    """The helper is a plain child process: nothing runs the caller's script again."""
    home, books = str(tmp_path / "home"), str(SAMPLES)
    script = tmp_path / "ingest_books.py"
    script.write_text(
        "from pathlib import Path\n"
        "from crag.context import Context\n"
        "from crag.ingest import prefetch\n"
        "from crag.ingest.indexer import ingest_path\n"
        "served, load = [], prefetch.ReadAhead.load\n"
        "def counted(self, path, data):\n"
        "    served.append(self._ahead is not None and self._helper is not None)\n"
        "    return load(self, path, data)\n"
        "prefetch.ReadAhead.load = counted\n"
        f"report = ingest_path(Context(home=Path({home!r})), Path({books!r}))\n"
        "print(report.chunks_written, report.exit_code, sum(served))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    written, code, by_helper = done.stdout.split()
    assert int(written) > 0 and code == "0"
    assert by_helper == "2"  # the second and third of the three PDFs
    assert "Traceback" not in done.stderr
