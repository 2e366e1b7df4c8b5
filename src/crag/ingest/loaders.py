"""One file in, its pages out: PDF via pypdf, plus Markdown and plain text.

Every way a file can be unusable becomes a `LoadError` with a one-line reason,
so the indexer can report it, skip the file and carry on with the others.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from crag.dates import document_date, read_date
from crag.ingest.page_edges import cited_labels, strip_running_lines
from crag.text import split_sentences

#: Suffix → kind. Anything else in a folder is ignored.
SUPPORTED: dict[str, str] = {
    ".pdf": "pdf",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
}


class LoadError(Exception):
    """A file that cannot be indexed; `reason` is short enough for one line."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)
        self.reason = reason

    def __reduce__(self) -> tuple[type[LoadError], tuple[Path, str]]:
        return LoadError, (self.path, self.reason)  # raised in the read-ahead process too


@dataclass(frozen=True)
class Page:
    number: int  # 1-based physical page
    label: str | None  # as a reader cites it (PDF page label); None for text files
    text: str


@dataclass
class LoadedDocument:
    path: Path
    kind: str
    title: str
    pages: list[Page]  # pages with text, in order
    page_count: int  # physical pages, empty ones included
    warnings: list[str] = field(default_factory=list)
    date: date | None = None  # when it was written, as its text or metadata says
    dated_by: str = ""  # "text" or "pdf"
    url: str = ""  # where a saved web page came from, as its head declares it
    front_matter: str = ""  # the title block a PDF's first page opens with


def dating(text: str, metadata: str = "") -> tuple[date | None, str]:
    """A document's date: the one its text introduces ("Last updated 3 May 2024"), else
    its PDF metadata (modification, else creation), else a date in its opening lines."""
    if when := document_date(text, byline=0):
        return when, "text"
    if metadata and (when := read_date(metadata)):
        return when, "pdf"
    if when := document_date(text):
        return when, "text"
    return None, ""


# `<!-- source: https://... -->`, or a `source:` / `url:` line in front matter
_PROVENANCE = re.compile(
    r"^[ \t]*(?:<!--[ \t]*)?(?:source|url|original[ \t]+url)[ \t]*:[ \t]*(https?://[^\s>]+)",
    re.I | re.M,
)


def provenance(text: str) -> str:
    """The web address a saved page declares at its top, if any."""
    m = _PROVENANCE.search(text[:2000])
    return m.group(1).rstrip(".,;)") if m else ""


def kind_of(path: Path) -> str | None:
    return SUPPORTED.get(path.suffix.lower())


def _read_raw(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def read_bytes(path: Path) -> bytes:
    """The file's bytes, with OS errors turned into readable reasons."""
    try:
        return _read_raw(path)
    except FileNotFoundError as exc:
        raise LoadError(path, "file not found (removed while ingesting?)") from exc
    except PermissionError as exc:
        raise LoadError(path, "permission denied (cannot read the file)") from exc
    except IsADirectoryError as exc:
        raise LoadError(path, "is a directory") from exc
    except OSError as exc:
        raise LoadError(path, f"cannot read: {exc.strerror or exc}") from exc


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def load_document(path: Path, data: bytes | None = None) -> LoadedDocument:
    """Pages of one supported file; raises `LoadError` with the reason it is unusable."""
    kind = kind_of(path)
    if kind is None:
        raise LoadError(path, f"unsupported file type {path.suffix or '(none)'!r}")
    if data is None:
        data = read_bytes(path)
    if not data:
        raise LoadError(path, "empty file (0 bytes)")
    if kind == "pdf":
        return _load_pdf(path, data)
    return _load_text(path, data, kind)


# --- PDF ----------------------------------------------------------------------------------


def _short(exc: BaseException) -> str:
    msg = " ".join(str(exc).split())
    if len(msg) > 120:
        msg = msg[:117] + "..."
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


_JUNK_TITLE = re.compile(r"^(untitled|microsoft word - .*|.*\.(docx?|pdf|tex|dvi))$", re.I)


def _load_pdf(path: Path, data: bytes) -> LoadedDocument:
    from pypdf import PasswordType, PdfReader  # pypdf loads only when a PDF does
    from pypdf.errors import DependencyError

    head = data[:1024]
    if b"%PDF-" not in head:
        preview = head[:16].decode("latin-1").encode("unicode_escape").decode("ascii")
        raise LoadError(path, f"not a PDF (no %PDF- header; starts with '{preview}')")
    try:
        reader = PdfReader(io.BytesIO(data))
    except Exception as exc:
        raise LoadError(path, f"corrupt PDF ({_short(exc)})") from exc

    if reader.is_encrypted:
        # Many PDFs are encrypted only against editing: the empty user password opens them.
        try:
            opened = reader.decrypt("")
        except DependencyError as exc:
            raise LoadError(path, f"encrypted PDF needs a crypto library ({_short(exc)})") from exc
        except Exception as exc:
            raise LoadError(path, f"encrypted PDF that cannot be opened ({_short(exc)})") from exc
        if opened == PasswordType.NOT_DECRYPTED:
            raise LoadError(path, "encrypted PDF (a password is required to read it)")

    try:
        n_pages = len(reader.pages)
    except Exception as exc:
        raise LoadError(path, f"corrupt PDF ({_short(exc)})") from exc
    if n_pages == 0:
        raise LoadError(path, "PDF has no pages")

    try:
        labels = list(reader.page_labels)
    except Exception:
        labels = []
    if len(labels) != n_pages:
        labels = [str(i + 1) for i in range(n_pages)]

    warnings: list[str] = []
    texts: list[str] = []
    failed_pages = 0
    for i in range(n_pages):
        try:
            raw = reader.pages[i].extract_text() or ""
        except Exception as exc:
            failed_pages += 1
            warnings.append(f"page {labels[i] or i + 1}: text extraction failed ({_short(exc)})")
            raw = ""
        texts.append(raw.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n"))

    if failed_pages == n_pages:
        raise LoadError(path, f"corrupt PDF (text extraction failed on all {n_pages} pages)")
    texts = strip_running_lines(texts)
    cited = cited_labels(labels)
    pages = [Page(number=i + 1, label=cited[i], text=t) for i, t in enumerate(texts) if t.strip()]
    if not pages:
        raise LoadError(
            path,
            f"no extractable text in {n_pages} page{'s' if n_pages != 1 else ''} "
            "(scanned or image-only PDF? run OCR first)",
        )

    title, stamp = "", ""
    try:
        meta = reader.metadata
        title = " ".join(str(meta.title or "").split()) if meta is not None else ""
        if meta is not None:
            stamp = str(meta.get("/ModDate") or meta.get("/CreationDate") or "")
    except Exception:
        title = ""
    when, dated_by = dating(pages[0].text, stamp)
    front = title_block(pages[0].text, full_line(pages))[0] if len(pages) > 1 else ""
    if not title or _JUNK_TITLE.match(title):
        title = front.split("\n", 1)[0] if front else path.stem
    return LoadedDocument(
        path=path,
        kind="pdf",
        title=title,
        pages=pages,
        page_count=n_pages,
        warnings=warnings,
        date=when,
        dated_by=dated_by,
        front_matter=front,
    )


# --- the title block -------------------------------------------------------------------------

#: A numbered heading ("3.1.2 Loss Function", "Chapter 4 ..."): where a section starts.
NUMBERED_HEADING = r"(?:Chapter|CHAPTER|Appendix|APPENDIX)?[ \t]*\d+(?:\.\d+)*[ \t]+[A-Z]"
_NUMBERED_HEADING = re.compile(NUMBERED_HEADING)
#: Title, subtitles, authors, edition, publisher: a title block longer than this is
#: something else (a list, a table of contents).
TITLE_BLOCK_LINES = 12
#: A line shorter than this share of the document's full lines was set on its own (a
#: title, a byline); a paragraph's lines run to the margin until its last one.
SET_ALONE = 0.85
#: "Halcyon Lattice Ltd.", "J. Smith": a full stop after so few words ends a name.
NAME_WORDS = 4


def full_line(pages: list[Page]) -> float:
    """How long a full line of the document is: the 90th percentile of its lines."""
    lengths = sorted(len(x.strip()) for p in pages for x in p.text.split("\n") if x.strip())
    return float(lengths[int(0.9 * (len(lengths) - 1))]) if lengths else 0.0


#: A line that states a value ("Default HTTPS port: 7420") or a list's item: a quick
#: reference card's facts, not the title block above them.
_STATED_VALUE = re.compile(r"\w:\s+\S{0,12}\d")
_BULLET = re.compile(r"^(?:[-*•–]|\d{1,2}[.)])\s")


def _title_line(line: str, width: float) -> bool:
    """A line of a title block: set alone (a title set large wraps into short lines too),
    without a sentence in it."""
    line = line.strip("*_ ")  # emphasis is no part of the words
    words = line.split()
    if not words or _NUMBERED_HEADING.match(line) or len(line) >= SET_ALONE * width:
        return False
    if _STATED_VALUE.search(line) or _BULLET.match(line):
        return False  # "Default port: 7420", "- 25 MB uploads": a fact, not a name
    return len(split_sentences(line)) == 1 and not (line[-1] in ".!?" and len(words) > NAME_WORDS)


def title_block(text: str, width: float) -> tuple[str, str]:
    """(title block, the rest) of a document's first page.

    A document opens with its title, subtitles, authors or publisher: lines set on
    their own, without a sentence, before the first paragraph or numbered heading. They
    name the document (its title and metadata) but say nothing about its subject, and
    an extractive answer would quote them as if they did. They stay in the chunk (its
    embedding finds the document by its title); what is graded and read goes without.
    """
    lines = text.split("\n")
    filled = [i for i, x in enumerate(lines) if x.strip()]
    end = 0
    for n, i in enumerate(filled):
        line = lines[i].strip()
        if n >= TITLE_BLOCK_LINES or not _title_line(line, width):
            break
        end = i + 1
    front = "\n".join(x.strip() for x in lines[:end] if x.strip())
    return front, "\n".join(lines[end:]).lstrip("\n")


# --- Markdown and text ------------------------------------------------------------------------

_COMMENT = re.compile(r"<!--.*?-->", re.S)
#: A YAML front-matter block opening a file, and fenced code: neither holds a heading.
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_FENCED = re.compile(r"^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1[ \t]*$", re.S | re.M)
_ATX = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)
_SETEXT = re.compile(r"^(\S[^\n]*)\n {0,3}(=+|-+)[ \t]*$", re.M)


#: Byte-order marks of the wide encodings (UTF-32 first: its mark begins with UTF-16's).
_WIDE = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
#: A multi-byte UTF-8 character: Windows-1252 text almost never holds one.
_UTF8_SEQUENCE = re.compile(rb"[\xc2-\xf4][\x80-\xbf]")


def _decode(path: Path, data: bytes, warnings: list[str]) -> str:
    wide = next((codec for bom, codec in _WIDE if data.startswith(bom)), None)
    if wide is not None:  # e.g. a PowerShell redirect: UTF-16 with its mark
        try:
            text = data.decode(wide)
        except UnicodeDecodeError:
            raise LoadError(path, f"not valid {wide.upper()} text") from None
    elif b"\x00" in data[:8192]:
        raise LoadError(path, "binary file, not text")
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            if _UTF8_SEQUENCE.search(data):  # UTF-8 with a stray byte or two
                text = data.decode("utf-8-sig", errors="replace")
                warnings.append("not all valid UTF-8; the bytes that are not were replaced")
            else:
                text = data.decode("cp1252", errors="replace")
                warnings.append("not valid UTF-8; decoded as Windows-1252")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def markdown_title(text: str) -> str | None:
    """The first heading (ATX `# x` or setext), if any: not a line of YAML front matter
    (whose closing `---` would underline it) nor a comment in a code block."""
    text = _FENCED.sub("", _FRONT_MATTER.sub("", text, count=1))
    candidates = []
    if m := _ATX.search(text):
        candidates.append((m.start(), m.group(1)))
    if m := _SETEXT.search(text):
        candidates.append((m.start(), m.group(1)))
    if not candidates:
        return None
    title = " ".join(min(candidates)[1].replace("*", "").replace("`", "").split())
    return title or None


def _load_text(path: Path, data: bytes, kind: str) -> LoadedDocument:
    warnings: list[str] = []
    text = _decode(path, data, warnings)
    url = provenance(text)
    title = None
    if kind == "markdown":
        # Files often open with a provenance/licence comment: not content.
        text = _COMMENT.sub("", text)
        title = markdown_title(text)
    text = text.strip()
    if not text:
        what = "only comments and whitespace" if kind == "markdown" else "only whitespace"
        raise LoadError(path, f"no text to index ({what})")
    when, dated_by = dating(text)
    # A text file's title is a marked heading, which stays with its text as section
    # headings do: it states the page's topic (a forum thread's question) for the grader.
    return LoadedDocument(
        path=path,
        kind=kind,
        title=title or path.stem,
        pages=[Page(number=1, label=None, text=text)],
        page_count=1,
        warnings=warnings,
        date=when,
        dated_by=dated_by,
        url=url,
    )
