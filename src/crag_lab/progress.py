"""A progress bar on stderr for long evaluation runs.

On a terminal it redraws one line; in a log (not a TTY) it prints a line every
tenth of the way, so CI output stays short.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Bar:
    def __init__(
        self,
        total: int,
        label: str,
        *,
        stream: TextIO | None = None,
        quiet: bool = False,
        live: bool | None = None,
    ) -> None:
        self.total = max(1, total)
        self.label = label
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.live = self.stream.isatty() if live is None else live
        self.done = 0
        self.started = time.perf_counter()
        self._next_log = 0.1

    def _line(self, note: str) -> str:
        fraction = min(1.0, self.done / self.total)
        elapsed = time.perf_counter() - self.started
        eta = elapsed / fraction * (1 - fraction) if fraction > 0 else 0.0
        filled = round(fraction * 24)
        bar = "#" * filled + "." * (24 - filled)
        return (
            f"{self.label} {fraction:4.0%} [{bar}] {self.done}/{self.total} "
            f"{elapsed:5.0f}s ETA {eta:4.0f}s {note}"
        )

    def advance(self, note: str = "", n: int = 1) -> None:
        self.done += n
        if self.quiet:
            return
        if self.live:
            self.stream.write("\r\x1b[2K" + self._line(note)[:119])
            self.stream.flush()
        elif self.done / self.total >= self._next_log or self.done >= self.total:
            self.stream.write(self._line(note)[:119] + "\n")
            self.stream.flush()
            while self._next_log <= self.done / self.total:
                self._next_log += 0.1

    def close(self) -> None:
        if not self.quiet and self.live:
            self.stream.write("\n")
            self.stream.flush()
