"""Loaders and chunking: pages, page labels, titles, and every unusable input."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from crag.ingest import loaders
from crag.ingest.chunking import chunk_pages
from crag.ingest.loaders import LoadError, load_document
from crag.ingest.page_edges import strip_running_lines

BOOK = "02_multilayer_perceptrons.pdf"


def _norm(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def book(books_dir: Path) -> Path:
    return books_dir / BOOK


def test_book_pages_labels_and_title(book: Path) -> None:
    reader = PdfReader(book)
    doc = load_document(book)
    assert doc.kind == "pdf"
    assert doc.page_count == len(reader.pages) == 43
    assert reader.metadata is not None
    assert doc.title == reader.metadata.title == "Multilayer Perceptrons and Building Deep Networks"
    labels = list(reader.page_labels)
    for page in doc.pages:
        assert page.label == labels[page.number - 1]
        raw = reader.pages[page.number - 1].extract_text()
        assert page.text in raw  # only whole edge lines are ever removed
        # the running footer "<title>  —  page N" is gone from every page
        assert not re.search(r"—\s+page \d+", page.text)
    assert "1.1.2.2 Sigmoid Function" in " ".join(p.text for p in doc.pages)


def test_book_chunks_are_verbatim_slices_of_their_page(book: Path) -> None:
    reader = PdfReader(book)
    labels = list(reader.page_labels)
    doc = load_document(book)
    chunks = chunk_pages(doc.pages, doc.kind, 900, 150)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert 150 < len(chunks) < 260  # ~4-5 chunks per page of ~2,800 characters
    for chunk in chunks:
        assert chunk.page in labels
        assert chunk.page == labels[chunk.page_number - 1]
        assert chunk.text in reader.pages[chunk.page_number - 1].extract_text()
        assert len(chunk.text) <= 900
    # chunks start at headings where the text has them
    assert any(c.text.startswith("1.1.2.2 Sigmoid Function") for c in chunks)


def test_roman_page_labels_are_kept(tmp_path: Path, make_pdf: Callable[..., bytes]) -> None:
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()

    def prose(kind: str, i: int) -> str:
        return " ".join(f"{kind} {words[(i * 5 + j) % 12]} {j}." for j in range(40))

    pages = [prose("Front matter", i) for i in range(2)] + [prose("Body", i) for i in range(3)]
    path = tmp_path / "labelled.pdf"
    path.write_bytes(make_pdf(pages, title="Labelled", labels=[(0, "/r", 1), (2, "/D", 1)]))
    doc = load_document(path)
    assert [p.label for p in doc.pages] == ["i", "ii", "1", "2", "3"]
    chunks = chunk_pages(doc.pages, doc.kind, 300, 50)
    assert {c.page for c in chunks} == {"i", "ii", "1", "2", "3"}
    for chunk in chunks:
        assert ("Front matter" in chunk.text) == (chunk.page in ("i", "ii"))


def test_two_pages_are_never_cited_alike(tmp_path: Path, make_pdf: Callable[..., bytes]) -> None:
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    pages = [
        " ".join(f"Part {i} {words[(i * 5 + j) % 12]} {j}." for j in range(40)) for i in range(5)
    ]
    path = tmp_path / "two_parts.pdf"  # two parts, each numbered from 1
    path.write_bytes(make_pdf(pages, title="Parts", labels=[(0, "/D", 1), (3, "/D", 1)]))
    labels = [p.label for p in load_document(path).pages]
    assert labels == ["1 (PDF page 1)", "2 (PDF page 2)", "3", "1 (PDF page 4)", "2 (PDF page 5)"]


def test_pdf_without_title_uses_file_stem(tmp_path: Path, make_pdf: Callable[..., bytes]) -> None:
    path = tmp_path / "no_title_here.pdf"
    path.write_bytes(make_pdf(["Some text on a page. " * 10]))
    assert load_document(path).title == "no_title_here"


def test_markdown_comment_stripped_and_heading_title(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text(
        "<!-- Source: somewhere. Licence: CC BY 4.0 -->\n\n# Support Vector Machines\n\n"
        "SVMs are a set of supervised learning methods.\n<!-- inline\nnote -->\nMore text.\n",
        encoding="utf-8",
    )
    doc = load_document(path)
    assert doc.title == "Support Vector Machines"
    assert len(doc.pages) == 1 and doc.pages[0].label is None
    assert "Source" not in doc.pages[0].text and "inline" not in doc.pages[0].text
    assert "More text." in doc.pages[0].text


def test_markdown_setext_title_and_text_file_stem(tmp_path: Path) -> None:
    md = tmp_path / "setext.md"
    md.write_text("Intro line\n==========\n\nBody text here.\n", encoding="utf-8")
    assert load_document(md).title == "Intro line"
    bare = tmp_path / "rgb_snippets.md"
    bare.write_text("Just a snippet ... without a heading.\n\nAnother.\n", encoding="utf-8")
    assert load_document(bare).title == "rgb_snippets"
    txt = tmp_path / "notes.txt"
    txt.write_text("# not a heading in a text file\nplain words\n", encoding="utf-8")
    assert load_document(txt).title == "notes"


def test_wide_and_nearly_utf8_text_is_read_as_written(tmp_path: Path) -> None:
    wide = tmp_path / "powershell.txt"  # `> file` in Windows PowerShell 5: UTF-16 + mark
    wide.write_bytes("Grüße aus Köln, port 7420.".encode("utf-16"))
    assert load_document(wide).pages[0].text == "Grüße aus Köln, port 7420."
    stray = tmp_path / "stray.txt"
    stray.write_bytes("The café’s naïve résumé.".encode() + b" \xff end")
    doc = load_document(stray)
    assert doc.pages[0].text.startswith("The café’s naïve résumé.") and doc.warnings


def test_a_markdown_title_is_no_front_matter_line_nor_code_comment(tmp_path: Path) -> None:
    yaml = tmp_path / "limits.md"
    yaml.write_text("---\nsource: x\ndate: 2024-05-02\n---\n\n# Rate limits\n\nText.\n")
    assert load_document(yaml).title == "Rate limits"
    fenced = tmp_path / "setup.md"
    fenced.write_text("```bash\n# install the server\n```\n\nSetup guide\n===\n\nText.\n")
    assert load_document(fenced).title == "Setup guide"


def test_non_utf8_text_is_decoded_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "latin.txt"
    path.write_bytes("Café crème brûlée, déjà vu.".encode("cp1252"))
    doc = load_document(path)
    assert "Café" in doc.pages[0].text
    assert doc.warnings and "UTF-8" in doc.warnings[0]


def test_encrypted_pdf_with_empty_user_password_is_read(
    tmp_path: Path, make_pdf: Callable[..., bytes]
) -> None:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(["Open to all readers. " * 9]))))
    writer.encrypt("", owner_password="owner-secret", algorithm="AES-128")
    path = tmp_path / "owner_only.pdf"
    with open(path, "wb") as fh:
        writer.write(fh)
    assert "Open to all readers." in load_document(path).pages[0].text


def _encrypted(make_pdf: Callable[..., bytes]) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(["Secret text. " * 20]))))
    writer.encrypt("secret", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _blank(_: Callable[..., bytes]) -> bytes:
    writer = PdfWriter()
    writer.add_blank_page(612, 792)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


BAD_INPUTS: dict[str, tuple[str, Callable[[Callable[..., bytes]], bytes], str]] = {
    "zero-byte": ("empty.pdf", lambda mk: b"", "empty file (0 bytes)"),
    "not-a-pdf": ("page.pdf", lambda mk: b"<html><body>hi</body></html>", "not a PDF"),
    "not-a-pdf-line": ("note.pdf", lambda mk: b"not a pdf\n", r"starts with 'not a pdf\n'"),
    "corrupt": ("broken.pdf", lambda mk: mk(["Some text. " * 50])[:400], "corrupt PDF"),
    "garbage-after-header": (
        "garbage.pdf",
        lambda mk: b"%PDF-1.7\n" + bytes(range(256)) * 8,
        "corrupt PDF",
    ),
    "encrypted": ("locked.pdf", _encrypted, "encrypted PDF (a password is required"),
    "scanned": ("scan.pdf", _blank, "no extractable text in 1 page (scanned"),
    "binary-txt": ("blob.txt", lambda mk: b"\x00\x01\x02\xff" * 50, "binary file"),
    "comment-only-md": ("empty.md", lambda mk: b"<!-- licence only -->\n\n", "no text to index"),
    "zero-byte-md": ("nothing.md", lambda mk: b"", "empty file (0 bytes)"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_gives_one_line_reason(
    case: str, tmp_path: Path, make_pdf: Callable[..., bytes]
) -> None:
    name, build, expected = BAD_INPUTS[case]
    path = tmp_path / name
    path.write_bytes(build(make_pdf))
    with pytest.raises(LoadError) as info:
        load_document(path)
    assert expected in info.value.reason
    assert "\n" not in str(info.value)
    assert str(info.value).startswith(str(path))


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests run as root, for whom chmod 000 changes nothing: make the read itself fail.
    path = tmp_path / "secret.pdf"
    path.write_bytes(b"%PDF-1.4\n")

    def deny(p: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(p))

    monkeypatch.setattr(loaders, "_read_raw", deny)
    with pytest.raises(LoadError, match="permission denied"):
        load_document(path)


def test_strip_running_lines_keeps_body_and_headings() -> None:
    topics = ["Linear Models", "Perceptrons", "Convolutions", "Attention", "Optimizers", "Kernels"]
    pages = [
        f"My Book — page {i}\nChapter {i} {topic}\nWhat {topic.lower()} do.\n"
        f"Why {topic.lower()} matter.\nMy Book — page {i}"
        for i, topic in enumerate(topics, start=1)
    ]
    out = strip_running_lines(pages)
    assert all("My Book" not in p for p in out)
    assert out[0] == "Chapter 1 Linear Models\nWhat linear models do.\nWhy linear models matter."
    # a short document: a line at the edge of every page is running too
    assert all("My Book" not in p for p in strip_running_lines(pages[:2]))


def test_page_markers_go_from_any_page_edge_and_body_lines_stay() -> None:
    page = "Results\nThe model fails on long inputs, shown on page 4\nMore text here.\n- 12 -"
    assert strip_running_lines([page]) == [
        "Results\nThe model fails on long inputs, shown on page 4\nMore text here."
    ]
    lone = "Handbook - page 1 of 1\nBody one.\nBody two.\nHandbook - page 1 of 1"
    assert strip_running_lines([lone]) == ["Body one.\nBody two."]
    different = ["Intro\nAlpha beta.\nGamma.", "Methods\nDelta.\nEpsilon."]
    assert strip_running_lines(different) == different  # nothing repeats: nothing goes


def test_a_bare_number_goes_only_where_it_counts_with_the_pages() -> None:
    # printed page numbers, two ahead of the pages' order (front matter unnumbered)
    topics = ["Lists", "Tuples", "Sets", "Dicts"]
    numbered = [f"{t} hold items.\nUse {t.lower()} well.\n{i + 3}" for i, t in enumerate(topics)]
    assert strip_running_lines(numbered) == [p.rsplit("\n", 1)[0] for p in numbered]
    # a footer goes first; the line above it is what `>>> 17 // 3` printed, not a number
    pages = [
        f"{t} hold items.\n>>> 17 // 3\n5\nThe Tutorial - page {i}" for i, t in enumerate(topics)
    ]
    assert all(p.endswith(">>> 17 // 3\n5") for p in strip_running_lines(pages))


def test_chunks_prefer_heading_and_sentence_boundaries() -> None:
    sentence = "This sentence is about gradient descent and nothing else. "
    text = (
        "1.1 First Section\n"
        + (sentence * 12).strip()
        + "\n1.2 Second Section\n"
        + ("Short words here again. " * 30).strip()
    )
    page = loaders.Page(number=1, label="1", text=text)
    chunks = chunk_pages([page], "pdf", 400, 80)
    assert chunks[0].text.startswith("1.1 First Section")
    assert any(c.text.startswith("1.2 Second Section") for c in chunks)
    for chunk in chunks:
        assert len(chunk.text) <= 400
        assert chunk.text.endswith("."), chunk.text[-40:]  # never mid-sentence
    # consecutive chunks of one long section overlap
    first_section = [c.text for c in chunks if "gradient" in c.text]
    assert len(first_section) >= 2
    assert first_section[1][:40] in first_section[0]


def test_tiny_page_fragments_are_merged_or_dropped() -> None:
    pages = [
        loaders.Page(1, "1", "continued from before.\n2.1 Topic\n" + "Words go on. " * 20),
        loaders.Page(2, "2", "Fig. 3"),
    ]
    chunks = chunk_pages(pages, "pdf", 900, 150)
    assert len(chunks) == 1
    assert chunks[0].text.startswith("continued from before.")
    assert all(len(_norm(c.text)) > 20 for c in chunks)


def test_a_documents_date_from_its_text_or_pdf_metadata(tmp_path: Path) -> None:
    from datetime import UTC, date, datetime

    from fpdf import FPDF

    def pdf(text: str, created: datetime) -> Path:
        doc = FPDF()
        doc.set_creation_date(created)
        doc.add_page()
        doc.set_font("helvetica", size=11)
        doc.multi_cell(0, 5, text)
        path = tmp_path / f"d{len(list(tmp_path.iterdir()))}.pdf"
        path.write_bytes(bytes(doc.output()))
        return path

    created = datetime(2023, 2, 10, 9, 0, tzinfo=UTC)
    body = "A manual about backups. It mentions 1 May 2019 somewhere further down the page."
    loaded = load_document(pdf("Backup manual\n\n" + body, created))
    assert (loaded.date, loaded.dated_by) == (date(2023, 2, 10), "pdf")
    # a date the text introduces beats the metadata (a PDF re-rendered later keeps it)
    loaded = load_document(pdf("Backup manual\nLast updated: 3 May 2024.\n" + body, created))
    assert (loaded.date, loaded.dated_by) == (date(2024, 5, 3), "text")


def test_a_saved_web_page_declares_its_address_and_date(tmp_path: Path) -> None:
    from datetime import date

    page = tmp_path / "thread.md"
    page.write_text(
        "<!-- source: https://forum.vendor.example/t/sync/4182 (fictional) -->\n\n"
        "# Sync drops\n\n*Thread started by someone on 3 October 2024.*\n\nText.\n"
    )
    loaded = load_document(page)
    assert loaded.url == "https://forum.vendor.example/t/sync/4182"
    assert (loaded.date, loaded.dated_by) == (date(2024, 10, 3), "text")
    plain = tmp_path / "notes.txt"
    plain.write_text("Notes on backups, kept since the release of 2019 and later.\n")
    assert (load_document(plain).date, load_document(plain).url) == (None, "")


def test_dates_as_text_and_metadata_write_them() -> None:
    from datetime import date

    from crag.dates import dates_in, document_date, read_date

    assert read_date("D:20241003120000Z") == date(2024, 10, 3)
    assert read_date("2024-10-03T12:00:00+02:00") == date(2024, 10, 3)
    assert read_date("Thu, 03 Oct 2024 12:00:00 GMT") == date(2024, 10, 3)
    assert read_date("Feb 25, 2018") == date(2018, 2, 25)
    assert read_date("soon") is None and read_date("2024-02-31") is None
    assert [d for _, d in dates_in("On 3rd Oct. 2024, or 2024/10/05; not May 2024.")] == [
        date(2024, 10, 3),
        date(2024, 10, 5),
    ]
    # the latest date a dating word introduces; else a byline's; else none
    assert document_date("Published 1 Jan 2021. Revised: 12 May 2023.") == date(2023, 5, 12)
    assert document_date("# Title\n\nBy Ann, 3 May 2022.\n\nBody.") == date(2022, 5, 3)
    assert document_date("x" * 400 + " In 3 May 2022 the war ended.") is None


_BODY = (
    "This policy explains how the company charges for licences, how invoices and payments\n"
    "work, and when you can get your money back. It applies to all licences bought directly\n"
    "from the company, through the online store or by invoice, on or after 1 April 2024.\n"
)


def test_a_title_block_is_front_matter_and_the_body_stays() -> None:
    width = loaders.full_line([loaders.Page(1, "1", _BODY)])
    title = "Billing Policy\nHandbook, part 3 of 3 - version 2024-03\nExample Ltd."
    front, rest = loaders.title_block(f"{title}\n1 Scope\n{_BODY}", width)
    assert front == title
    assert rest == "1 Scope\n" + _BODY  # a numbered heading starts the body
    # a page that opens with its text, or with a sentence set alone, has no title block
    assert loaders.title_block(_BODY, width) == ("", _BODY)
    alone = "The licence is valid for one year from the purchase.\n" + _BODY
    assert loaders.title_block(alone, width) == ("", alone)
    # a reference card's facts under its title are the card's content
    facts = "Default HTTPS port: 7420\nMaximum attachment size: 25 MB\n- Backups kept 14 days"
    assert loaders.title_block(f"Quick reference\n{facts}\n{_BODY}", width) == (
        "Quick reference",
        f"{facts}\n{_BODY}",
    )


def test_markdown_title_heading_stays_with_its_text(tmp_path: Path) -> None:
    path = tmp_path / "post.md"
    path.write_text("# Pricing changes\n\n*Posted on 4 December 2024.*\n\n" + _BODY)
    doc = load_document(path)
    assert doc.title == "Pricing changes" and doc.front_matter == ""
    assert doc.pages[0].text.startswith("# Pricing changes")


def test_book_title_block_is_its_front_matter(book: Path) -> None:
    doc = load_document(book)
    assert doc.front_matter.startswith("Multilayer Perceptrons and")
    lines = doc.pages[0].text.split("\n")
    front = doc.front_matter.split("\n")
    assert lines[: len(front)] == front  # the chunks keep it: their embedding finds the title
    assert lines[len(front)].startswith("Adapted from")  # the notice is a sentence: no title
