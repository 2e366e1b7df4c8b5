"""The lab's subcommands, each a module with NAME, HELP, add_arguments and run.

They reach the `crag` command through the `crag.commands` entry points
(pyproject.toml), so crag itself never imports them.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from crag.cli.options import context_from_args
from crag.context import Context


def measured_context(args: argparse.Namespace) -> Context:
    """The run's Context from the flags, without the answer cache: the lab measures the
    graph itself, and a cached answer would skip the steps it measures (and store answers
    the lab's partial graphs never verified)."""
    return context_from_args(args).with_overrides(cache=False)


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
