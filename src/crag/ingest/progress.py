"""A dependency-free progress display for ingest events, on stderr.

On a terminal it redraws one line (files, pages, chunks/s, ETA); in a log (not a
TTY) it writes one line per finished file instead, so CI output stays readable.
Problems are always printed as their own line, naming the file and the reason.
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from crag.context import DEFAULT_TENANT
from crag.text import counted, printable

if TYPE_CHECKING:
    from crag.ingest.indexer import Event


def _fmt_time(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1) :]


class Progress:
    """Feed it the indexer's events (`on_event=progress`)."""

    def __init__(
        self, stream: TextIO | None = None, *, live: bool | None = None, quiet: bool = False
    ) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.quiet = quiet
        self.files_total = 0
        self.files_done = 0
        self.pages = 0
        self.chunks = 0
        self.source = ""
        self.file_fraction = 0.0
        self._done_in_file = 0
        self.started = time.perf_counter()
        self.embed_started: float | None = None
        self._last_draw = 0.0
        self._drawn = False

    # -- output --
    def _clear(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[2K")
            self._drawn = False

    def message(self, line: str) -> None:
        """A line that must stay visible (errors, warnings)."""
        self._clear()
        self.stream.write(printable(line) + "\n")
        self.stream.flush()
        self._draw(force=True)

    def _rate(self) -> float:
        if self.embed_started is None or self.chunks == 0:
            return 0.0
        return self.chunks / max(time.perf_counter() - self.embed_started, 1e-6)

    def _draw(self, force: bool = False) -> None:
        if not self.live or self.quiet or self.files_total == 0:
            return
        now = time.perf_counter()
        if not force and now - self._last_draw < 0.1:
            return
        self._last_draw = now
        width = shutil.get_terminal_size((100, 20)).columns
        fraction = min(1.0, (self.files_done + self.file_fraction) / self.files_total)
        elapsed = now - self.started
        eta = (
            f" ETA {_fmt_time(elapsed / fraction * (1 - fraction))}" if 0.02 < fraction < 1 else ""
        )
        bar_w = 20
        filled = round(fraction * bar_w)
        text = (
            f"{fraction:4.0%} [{'#' * filled}{'.' * (bar_w - filled)}] "
            f"{self.files_done}/{self.files_total} files, {counted(self.pages, 'page')}, "
            f"{counted(self.chunks, 'chunk')}, {self._rate():.1f} chunks/s{eta}"
        )
        room = width - len(text) - 3
        if self.source and room > 8:
            text += "  " + _shorten(self.source, room)
        self.stream.write("\r\x1b[2K" + printable(text)[: width - 1])
        self.stream.flush()
        self._drawn = True

    # -- events --
    def __call__(self, event: Event) -> None:
        kind = event.get("event")
        if kind == "start":
            self.files_total = int(event["files"])
            self.started = time.perf_counter()
            self._draw(force=True)
        elif kind == "file":
            self.source = printable(str(event["source"]), one_line=True)
            self.file_fraction = 0.0
            self._done_in_file = 0
            self._draw()
        elif kind == "loaded":
            self.pages += int(event["pages"])
            if event["todo"] and self.embed_started is None:
                self.embed_started = time.perf_counter()
            if not event["todo"]:
                self.file_fraction = 1.0
        elif kind == "progress":
            done = int(event["done"])
            self.chunks += done - self._done_in_file
            self._done_in_file = done
            self.file_fraction = done / max(1, int(event["todo"]))
            self._draw()
        elif kind == "file_done":
            self._file_done(event)
        elif kind == "adopted":
            self.message(
                f"{event['chunks']} chunks of {event['collection']!r} ingested before tenants "
                "existed now belong to the tenant 'default'"
            )
        elif kind == "pruned":
            sources = event["sources"]
            self.message(f"pruned {len(sources)} removed file(s), {event['chunks']} chunks")
        elif kind == "done":
            self._clear()
            self.stream.flush()

    def _file_done(self, event: dict[str, Any]) -> None:
        if event.get("index", 0) >= 0:
            self.files_done += 1
        self.file_fraction = 0.0
        source, status = printable(str(event["source"]), one_line=True), event["status"]
        for warning in event.get("warnings") or []:
            self.message(f"warning: {source}: {warning}")
        if status == "failed":
            self.message(f"error: {source}: {event['reason']}")
        elif not self.live and not self.quiet and status != "unchanged":
            self.message(
                f"[{self.files_done}/{self.files_total}] {source}: {status}, "
                f"{counted(event['pages'], 'page')}, {counted(event['chunks'], 'chunk')} "
                f"({event['embedded']} embedded) in {event['seconds']:.1f} s"
            )
        self._draw(force=True)


def format_summary(summary: dict[str, Any]) -> str:
    """The closing lines: what happened to the files and how long it took."""
    secs = summary["seconds"]
    tenant = summary.get("tenant", DEFAULT_TENANT)
    whose = f" (tenant {tenant!r})" if tenant != DEFAULT_TENANT else ""
    lines = [
        f"ingest into {summary['collection']!r}{whose}: {summary['files_ok']} file(s) indexed, "
        f"{summary['files_unchanged']} unchanged, {summary['files_failed']} failed; "
        f"{counted(summary['pages'], 'page')}, "
        f"{counted(summary['chunks_written'], 'chunk')} written "
        f"({summary['chunks_embedded']} embedded), {summary['chunks_deleted']} removed; "
        f"{secs:.1f} s"
        + (
            f" ({summary['chunks_embedded'] / secs:.1f} chunks/s)"
            if summary["chunks_embedded"] and secs > 0
            else ""
        )
    ]
    if summary["pruned"]:
        lines.append(f"pruned: {', '.join(summary['pruned'])}")
    if summary["error"]:
        lines.append(
            f"stopped: {summary['error']} ({summary['not_processed']} file(s) not processed; "
            "the file's previous chunks were kept)"
        )
    if summary["interrupted"]:
        lines.append(
            "interrupted: re-run the same command to finish (chunks already written are kept)"
        )
    return "\n".join(lines)
