"""`crag config`: the knobs a user sets, group by group, with each value and where it
came from (an argument, a `CRAG_*` environment variable, settings.json, or the
default); `--all` adds the tuning knobs the lab fits and switches off to measure."""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path
from typing import Any

from crag.cli.options import add_context_flags, context_from_args
from crag.context import GROUPS

NAME = "config"
HELP = "list the knobs: value, origin and what each does"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--all", action="store_true", help="also the tuning knobs (thresholds, weights, switches)"
    )
    add_context_flags(parser)


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


def run(args: argparse.Namespace) -> int:
    ctx = context_from_args(args)
    shown = [(knob, value) for knob, value in ctx.items() if args.all or not knob.tuning]
    if args.json:
        out: dict[str, dict[str, Any]] = {group: {} for group in GROUPS}
        for knob, value in shown:
            out[knob.group][knob.attr] = {
                "knob": knob.name,
                "value": _plain(value),
                "origin": ctx.origin(knob.name),
            }
        print(json.dumps(out, indent=2))
        return 0
    group = ""
    for knob, value in shown:
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
    print("\nset one with --set NAME=VALUE, CRAG_NAME=VALUE or CRAG_HOME/settings.json")
    if not args.all:
        hidden = sum(knob.tuning for knob, _ in ctx.items())
        print(f"{hidden} tuning knobs (thresholds, weights, switches) are listed with --all")
    return 0
