"""The reader's training corpora: ten Debian documentation packages, read as plain text.

Only these packages are read (none of them is a source of either dev library, and the
hidden libraries stay unseen). Each corpus names its package, the files it reads and
how a file becomes text; `apt-get install` the packages first (`crag gen-questions`
says which are missing).
"""

from __future__ import annotations

import gzip
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from crag.errors import CragError
from crag.ingest.loaders import load_document

#: Elements whose text is never prose (code, navigation, page furniture).
_SKIP = {"script", "style", "nav", "header", "footer", "pre", "code-block", "head", "title"}
_BLOCK = {
    "p", "div", "li", "dd", "dt", "h1", "h2", "h3", "h4", "h5", "h6", "td", "th", "tr",
    "br", "table", "ul", "ol", "dl", "section", "blockquote", "hr", "pre",
}  # fmt: skip


class _Text(HTMLParser):
    """The visible prose of an HTML page, a line per block."""

    def __init__(self, keep_pre: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.skip = _SKIP - ({"pre"} if keep_pre else set())
        self.depth = 0  # inside this many skipped elements
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.depth += tag in self.skip
        if tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.skip and self.depth:
            self.depth -= 1
        if tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.depth:
            self.parts.append(data)


def html_text(raw: str, keep_pre: bool = False) -> str:
    parser = _Text(keep_pre)
    parser.feed(raw)
    return _paragraphs("".join(parser.parts))


def _paragraphs(text: str) -> str:
    """Blank lines between blocks, runs of spaces cut to one."""
    lines = [re.sub(r"[ \t]+", " ", line).strip() for line in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _vim(raw: str) -> str:
    """Vim's help pages: the text is a <pre>; tags (*x*) and links (|x|) lose their marks."""
    text = html_text(raw, keep_pre=True)
    text = re.sub(r"\*(\S+?)\*", "", text)
    return re.sub(r"\|(\S+?)\|", r"\1", text)


_POD_CODE = re.compile(r"[A-Z]<<+\s(.*?)\s>>+|[A-Z]<([^<>]*)>")
_POD_ESC = {"gt": ">", "lt": "<", "verbar": "|", "sol": "/"}


def _pod(raw: str) -> str:
    """Perl's POD: headings and prose kept, verbatim (indented) blocks and index marks dropped."""
    out = []
    for para in re.split(r"\n\s*\n", raw):
        if not para.strip() or para[:1] in " \t":
            continue
        if para.startswith("="):
            head = re.match(r"=(?:head\d|item)\s+(.*)", para, re.S)
            if not head:
                continue
            para = head.group(1)
        para = re.sub(r"X<[^<>]*>", "", para)
        para = re.sub(r"E<(\w+)>", lambda m: _POD_ESC.get(m.group(1), ""), para)
        for _ in range(4):  # nested codes, innermost first
            para = _POD_CODE.sub(lambda m: m.group(1) or m.group(2) or "", para)
        out.append(" ".join(para.split()))
    return "\n\n".join(out)


def _rst(raw: str) -> str:
    """reStructuredText: directives and their indented bodies dropped, roles read as text."""
    out, skipping = [], False
    for line in raw.splitlines():
        if re.match(r"\.\.\s", line):
            skipping = not re.match(r"\.\.\s+(versionadded|versionchanged|note|deprecated)", line)
            if not skipping:
                out.append(line.split("::", 1)[-1])
            continue
        if skipping and (not line.strip() or line[:1] in " \t"):
            continue
        skipping = False
        if re.fullmatch(r"([-=^~*#\"'])\1{2,}", line.strip()):
            continue
        line = re.sub(r":[\w:]+:`([^`<]*?)(?:\s*<[^>]*>)?`", r"\1", line)
        out.append(line.replace("``", "").replace("`", ""))
    return _paragraphs("\n".join(out))


def _asciidoc(raw: str) -> str:
    """git's AsciiDoc sources: listing blocks and attribute lines dropped."""
    out, listing, before = [], False, ""
    for line in raw.splitlines():
        stripped, above, before = line.strip(), before, line.strip()
        if re.fullmatch(r"(-{4,}|\.{4,}|\+{4,})", stripped):
            if not (above and abs(len(above) - len(stripped)) <= 1):  # else a title's rule
                listing = not listing
            continue
        if listing or re.fullmatch(r"(={4,}|~{4,}|\^{4,})", stripped):
            continue
        if re.match(r"(include::|ifdef::|endif::|ifndef::|:\w[\w-]*:|\[\[|\[verse)", stripped):
            continue
        out.append(line.replace("`", "").replace("'", "'"))
    return _paragraphs("\n".join(out))


def _read(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def _ri(path: Path) -> str:
    """One Ruby class's documentation, as `ri` renders it (the package stores Ruby Marshal)."""
    name = "::".join(path.parent.relative_to(_RI_ROOT).parts)
    try:
        shown = subprocess.run(
            ["ri", "--no-pager", "--all", "-f", "markdown", "-d", str(_RI_ROOT), name],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""  # a class `ri` cannot show is a document with no text
    prose = [line for line in shown.stdout.splitlines() if not line.startswith("    ")]
    text = re.sub(r"^#+\s*", "", "\n".join(prose), flags=re.M)
    return re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).replace("*", "")


_RI_ROOT = Path("/usr/share/ri/3.1.0/system")


@dataclass(frozen=True)
class Corpus:
    name: str
    package: str  # the Debian package that installs it
    files: Callable[[], list[Path]]
    text: Callable[[Path], str]
    licence: str  # as the package's Debian copyright file gives it


def _glob(root: str, *patterns: str, exclude: str = "^$") -> Callable[[], list[Path]]:
    def files() -> list[Path]:
        base = Path(root)
        found = {p for pattern in patterns for p in base.glob(pattern) if p.is_file()}
        return sorted(p for p in found if not re.search(exclude, p.as_posix()))

    return files


def _html(keep_pre: bool = False) -> Callable[[Path], str]:
    return lambda path: html_text(_read(path), keep_pre)


def _pdf(path: Path) -> str:
    """A PDF as crag's ingest reads it (running heads and page numbers dropped)."""
    return "\n\n".join(page.text for page in load_document(path).pages)


def _ri_classes() -> list[Path]:
    return sorted(_RI_ROOT.glob("**/cdesc-*.ri"))


_RUST = "/usr/share/doc/rust-doc/html"
_RUST_BOOKS = ("book", "reference", "rust-by-example", "nomicon", "edition-guide", "rustc")
_RUST_STUBS = r"print\.html|-edition/"  # whole-book copies, and old editions' redirect pages

CORPORA: dict[str, Corpus] = {
    c.name: c
    for c in (
        Corpus(
            "git",
            "git-doc",
            _glob("/usr/share/doc/git-doc", "*.txt", "howto/*.txt", "technical/*.txt"),
            lambda p: _asciidoc(_read(p)),
            "GPL-2",
        ),
        Corpus(
            "bash",
            "bash-doc",
            _glob("/usr/share/doc/bash", "bash.pdf", "bashref.pdf"),
            _pdf,
            "GPL-3+ (the manual: GNU FDL 1.3)",
        ),
        Corpus(
            "debian-reference",
            "debian-reference-en",
            _glob("/usr/share/debian-reference", "*.en.html"),
            _html(),
            "GPL-2+",
        ),
        Corpus(
            "perl",
            "perl-doc",
            _glob("/usr/share/perl/5.36.0/pod", "*.pod", exclude=r"perl5\d+delta|perltoc"),
            lambda p: _pod(_read(p)),
            "GPL-1+ or Artistic",
        ),
        Corpus(
            "rust",
            "rust-doc",
            _glob(_RUST, *(f"{b}/**/*.html" for b in _RUST_BOOKS), exclude=_RUST_STUBS),
            _html(),
            "MIT or Apache-2.0",
        ),
        Corpus(
            "nginx",
            "nginx-doc",
            _glob("/usr/share/doc/nginx-doc", "changelog.gz"),
            _read,
            "BSD-2-clause",
        ),
        Corpus(
            "cmake",
            "cmake-doc",
            _glob("/usr/share/doc/cmake-data/html/_sources", "**/*.rst.txt"),
            lambda p: _rst(_read(p)),
            "BSD-3-clause",
        ),
        Corpus(
            "vim",
            "vim-doc",
            _glob("/usr/share/doc/vim/html", "*.html", exclude=r"/(index|tags|vim-policy)\.html"),
            lambda p: _vim(_read(p)),
            "Vim licence (the user manual: OPL-1+)",
        ),
        Corpus("ruby", "ruby3.1-doc", _ri_classes, _ri, "BSD-2-clause or Ruby"),
        Corpus(
            "go",
            "golang-doc",
            _glob("/usr/share/doc/golang-1.19-doc/html", "*.html", exclude="go1.17_spec"),
            _html(),
            "Go licence (BSD-3-clause style)",
        ),
    )
}


def corpora(names: list[str] | None = None) -> list[Corpus]:
    """The named corpora (all by default); a package that is not installed is an error."""
    unknown = [n for n in names or [] if n not in CORPORA]
    if unknown:
        raise CragError(f"unknown corpora {', '.join(unknown)}: use {', '.join(CORPORA)}")
    chosen = [CORPORA[n] for n in (names or list(CORPORA))]
    missing = [c.package for c in chosen if not c.files()]
    if missing:
        raise CragError(
            "training corpora not installed: apt-get install " + " ".join(sorted(set(missing)))
        )
    return chosen
