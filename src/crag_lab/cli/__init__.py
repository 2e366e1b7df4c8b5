"""The lab's subcommands, each a module with NAME, HELP, add_arguments and run.

They reach the `crag` command through the `crag.commands` entry points
(pyproject.toml), so crag itself never imports them.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def grid_step(span: float = 1.0) -> Callable[[str], float]:
    """An argparse type: a threshold grid step in (0, span], refused before any question
    runs instead of after a long grading pass."""

    def parse(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {raw!r}") from None
        if not (math.isfinite(value) and 0 < value <= span):
            raise argparse.ArgumentTypeError(f"must be in (0, {span:g}], got {raw}")
        return value

    return parse
