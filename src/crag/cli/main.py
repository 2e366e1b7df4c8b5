"""`crag`: ingest a library and ask it questions (with the lab: evaluate and tune).

Every subcommand is a module with the same four names: `NAME`, `HELP`,
`add_arguments(parser)` and `run(args) -> int` (the exit code). Building the parser
imports every subcommand module, so each imports what only `run` needs (LangGraph,
Chroma, the models) inside `run`: `crag --help` stays instant.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Iterator
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any, NoReturn, TextIO

from crag.cli import ask, chat, config, demo, ingest
from crag.errors import CragError
from crag.offline import use_offline_defaults
from crag.redact import SecretFilter, scrub
from crag.text import printable


def plugged_in() -> list[ModuleType]:
    """Subcommands that other packages add (the lab's eval, tune and train-grader) through
    the `crag.commands` entry points: crag itself never imports them."""
    commands = []
    for entry in entry_points(group="crag.commands"):
        try:
            commands.append(entry.load())
        except ModuleNotFoundError as exc:  # its extra is not installed
            logging.getLogger(__name__).debug("skipping `crag %s`: %s", entry.name, exc)
    return commands


class OneLineErrors(argparse.ArgumentParser):
    """argparse whose usage errors are one line, as crag's others are; --help has the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("crag")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(prog="crag", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    parser.add_argument("--version", action="version", version=f"crag {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in [ingest, ask, chat, demo, config, *plugged_in()]:
        child = sub.add_parser(command.NAME, help=command.HELP, description=command.__doc__)
        command.add_arguments(child)
        child.set_defaults(run=command.run, command_parser=child)
    return parser


def main(argv: list[str] | None = None) -> int:
    args, extra = build_parser().parse_known_args(argv)
    if extra:  # the subcommand's own error, pointing to its own --help
        args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from dotenv import load_dotenv

    load_dotenv(".env", override=False)  # the working folder's .env; the shell wins
    use_offline_defaults()  # no telemetry or tracing calls leave the machine
    sys.excepthook = _scrubbed_excepthook
    with scrubbed_output():  # no API key reaches the terminal, whatever quotes it
        logging.basicConfig(
            level=logging.DEBUG if args.verbose else logging.WARNING,
            format="%(levelname)s %(name)s: %(message)s",
        )
        for handler in logging.getLogger().handlers:
            if not any(isinstance(f, SecretFilter) for f in handler.filters):
                handler.addFilter(SecretFilter())
        try:
            code: int = args.run(args)
            sys.stdout.flush()  # a reader gone (`| head`) shows here, not at exit
        except BrokenPipeError:  # the reader has what it wanted: end quietly
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # no second error at exit
            return 141  # as a command stopped by SIGPIPE
        except (CragError, ValueError) as exc:  # the user's to fix: one line (-v: traceback)
            if args.verbose:
                traceback.print_exc()
            print(f"crag {args.command}: error: {printable(str(exc))}", file=sys.stderr)
            return 2
        except OSError as exc:  # the machine's: a full disk, a read-only folder (-v: traceback)
            if args.verbose:
                traceback.print_exc()
            print(f"crag {args.command}: error: {printable(str(exc))}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("crag: interrupted", file=sys.stderr)
            return 130
    return code


def _scrubbed_excepthook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
    """A crash's traceback (a bug), without secrets."""
    sys.stderr.write(scrub("".join(traceback.format_exception(kind, exc, tb))))


class _Scrubbing:
    """A text stream that scrubs what is written to it (`crag.redact.scrub`)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(scrub(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def scrubbed_output() -> Iterator[None]:
    """stdout and stderr scrubbed of the machine's secrets while a command runs."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Scrubbing(out), _Scrubbing(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


if __name__ == "__main__":
    sys.exit(main())
