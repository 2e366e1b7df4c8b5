"""`crag config`: every knob, group by group, with its value and where the value came from
(an argument, a `CRAG_*` environment variable, settings.json, or the default)."""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path
from typing import Any

from crag.cli.options import add_context_flags, context_from_args
from crag.context import GROUPS

NAME = "config"
HELP = "list every knob: value, origin and what it does"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_context_flags(parser)


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


def run(args: argparse.Namespace) -> int:
    ctx = context_from_args(args)
    if args.json:
        out: dict[str, dict[str, Any]] = {group: {} for group in GROUPS}
        for knob, value in ctx.items():
            out[knob.group][knob.attr] = {
                "knob": knob.name,
                "value": _plain(value),
                "origin": ctx.origin(knob.name),
            }
        print(json.dumps(out, indent=2))
        return 0
    group = ""
    for knob, value in ctx.items():
        if knob.group != group:
            group = knob.group
            print(f"\n[{group}] {(GROUPS[group].__doc__ or '').strip()}")
        origin = ctx.origin(knob.name)
        print(
            f"  {knob.name} = {_plain(value)!r}" + ("" if origin == "default" else f"  ({origin})")
        )
        print(
            textwrap.fill(knob.description, 88, initial_indent=" " * 6, subsequent_indent=" " * 6)
        )
    print("\nset one with --set NAME=VALUE, CRAG_NAME=VALUE or HOME/settings.json")
    return 0
