"""`crag`: ingest a library, ask questions, evaluate and tune the grader."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from importlib import import_module

from crag.offline import use_offline_defaults

use_offline_defaults()  # no telemetry or tracing calls leave the machine

SUBCOMMANDS = ["ingest", "ask", "demo", "eval", "tune", "train_grader"]


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Callable[..., int]]]:
    parser = argparse.ArgumentParser(prog="crag", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    runners: dict[str, Callable[..., int]] = {}
    for name in SUBCOMMANDS:
        try:
            module = import_module(f"crag.cli.{name}")
        except ModuleNotFoundError as exc:  # a subcommand whose extras are missing
            if exc.name and exc.name.startswith("crag.cli"):
                continue
            raise
        module.add_parser(sub)  # registers the subcommand as NAME with "-" for "_"
        runners[name.replace("_", "-")] = module.run
    return parser, runners


def main(argv: list[str] | None = None) -> int:
    parser, runners = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    from crag.providers.errors import ProviderError

    try:
        return runners[args.command](args)
    except ProviderError as exc:
        print(f"crag: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"crag: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("crag: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
