"""`crag chat`: a conversation in the terminal; follow-ups are read with what came before.

The conversation is checkpointed in CRAG_HOME (SQLite), so `crag chat --thread ID`
resumes it after a restart. One question per line; an empty line or Ctrl-D ends. A
question that fails prints its error and the chat goes on; the exit code is then 2.
"""

from __future__ import annotations

import argparse
import sys
import uuid

from crag.cli.ask import sources
from crag.cli.options import add_context_flags, check_before_asking, context_from_args, where_flags
from crag.errors import CragError
from crag.text import printable

NAME = "chat"
HELP = "a conversation with the library: follow-ups understood, resumable by thread id"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--thread", default=None, help="conversation id to resume (default: a new one)"
    )
    add_context_flags(parser)


def _write(text: str) -> None:
    sys.stdout.write(printable(text))
    sys.stdout.flush()


class Echo:
    """Prints the answer as the model writes it, and remembers what it printed."""

    def __init__(self) -> None:
        self.text = ""

    def __call__(self, piece: str) -> None:
        _write(("crag> " if not self.text else "") + piece)
        self.text += piece


def run(args: argparse.Namespace) -> int:
    from crag.api import ask, summary  # LangGraph and the models: not for --help
    from crag.models.chat import EXTRACTIVE
    from crag.nodes.generate import CITE, unmarked
    from crag.text import sentence_ends

    ctx = context_from_args(args)
    check_before_asking(ctx)
    thread = args.thread or uuid.uuid4().hex[:12]
    tty = sys.stdin.isatty()
    again = f"crag chat --thread {thread}{where_flags(ctx)}"
    print(f"thread {thread} (resume with: {again})", file=sys.stderr)
    failed = 0
    while True:
        try:
            line = input("you> " if tty else "")
        except EOFError:
            break
        if not line.strip():
            break
        echo = Echo()
        try:
            state = ask(
                line,
                context=ctx,
                thread_id=thread,
                on_token=None if ctx.models.chat_model == EXTRACTIVE else echo,
            )
        except (CragError, ValueError) as exc:  # this question fails; the chat goes on
            print(f"crag chat: error: {printable(str(exc))}", file=sys.stderr)
            failed += 1
            continue
        result = summary(state)
        written, final = echo.text.strip(), result["answer"]
        if written and CITE.search(written) and CITE.sub("[]", written) == CITE.sub("[]", final):
            pairs = zip(CITE.findall(written), CITE.findall(final), strict=False)
            moved = dict.fromkeys(f"[{a}] is [{b}]" for a, b in pairs if a != b)
            if moved:  # sources renumbered
                _write(f"\n(sources as listed below: {', '.join(moved)})")
        elif written and written == unmarked(final) != final:  # marks added where none were
            ends = sentence_ends(final)
            marks = [
                " ".join(f"[{n}]" for n in CITE.findall(final[a:b]))
                for a, b in zip([0, *ends], ends, strict=False)
            ]
            listed = "; ".join(f"sentence {i} {m}" for i, m in enumerate(marks, 1) if m)
            _write(f"\n(sources: {listed})")
        elif written != final:  # declined or corrected after it was written
            _write(("\n" if echo.text else "") + f"crag> {final}")
        _write("\n")
        for source_line in sources(result):
            _write(f"{source_line}\n")
    return 2 if failed else 0  # a script learns that some questions were not answered
