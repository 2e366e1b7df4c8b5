"""Layout benchmark: how big the runtime is, and how much of it one question walks through.

Prints the runtime's size (`src/crag`: lines, modules, the largest), the knobs `crag
config` lists and the README's length. Then it ingests the sample library into a new
store and follows each demo question from `crag.api.aask` in a fresh process (the
extractive answerer, so no model is needed): the runtime files whose functions run,
the functions, and the lines those functions span (nested ones counted once; module and
class bodies, which run on import, are not counted). A newcomer following one question
through crag reads those files. Functions are counted as code objects, so a lambda or a
comprehension counts as one. No assertions: these are figures to compare between
revisions.

    .venv/bin/python benchmarks/bench_layout.py [--questions N] [--home DIR] [--files]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from inspect import CO_NEWLOCALS
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from crag.context import Context

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "src" / "crag"
SAMPLES = ROOT / "samples"


def runtime_size() -> dict[str, Any]:
    """Lines per module of the runtime package, the knobs `crag config` lists (the
    tuning knobs come with --all) and the README's length."""
    sizes = {
        str(p.relative_to(RUNTIME)): len(p.read_text(encoding="utf-8").splitlines())
        for p in sorted(RUNTIME.rglob("*.py"))
    }
    largest = max(sizes, key=sizes.__getitem__)
    return {
        "lines": sum(sizes.values()),
        "modules": len(sizes),
        "largest": (largest, sizes[largest]),
        "over_400": sorted(m for m, n in sizes.items() if n > 400),
        "knobs": sum(not knob.tuning for knob, _ in Context().items()),
        "readme": len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()),
    }


def trace(question: str) -> dict[str, Any]:
    """In this process: ask one question and note every runtime function that runs."""
    prefix = str(RUNTIME) + os.sep
    codes: set[CodeType] = set()

    def seen(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            codes.add(frame.f_code)

    from crag.api import ask

    threading.setprofile(seen)  # crag's nodes run on its background loop's thread
    sys.setprofile(seen)
    ask(question, chat_model="extractive")
    sys.setprofile(None)
    threading.setprofile(None)
    # functions only: a module's or class's body runs once, on import
    ran = [c for c in codes if c.co_flags & CO_NEWLOCALS and c.co_filename.startswith(prefix)]
    lines: dict[str, set[int]] = {}
    for code in ran:
        last = max((line for *_, line in code.co_lines() if line), default=code.co_firstlineno)
        lines.setdefault(code.co_filename, set()).update(range(code.co_firstlineno, last + 1))
    return {
        "files": {os.path.relpath(f, RUNTIME): sorted(s) for f, s in sorted(lines.items())},
        "functions": len(ran),
    }


def _run(argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} failed ({done.returncode}): {done.stderr[-800:]}")
    return done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=7, help="demo questions followed")
    parser.add_argument(
        "--home", type=Path, default=None, help="a store of the samples (else a new one)"
    )
    parser.add_argument(
        "--files",
        action="store_true",
        help="also list each file the questions ran: lines of functions run / lines held",
    )
    parser.add_argument("--trace", help=argparse.SUPPRESS)  # the child's question
    args = parser.parse_args()
    if args.trace is not None:
        print(json.dumps(trace(args.trace)))
        return 0
    size = runtime_size()
    print(f"runtime: {size['lines']:,} lines in {size['modules']} modules")
    print(f"largest module: {size['largest'][0]} ({size['largest'][1]} lines)")
    print(f"modules over 400 lines: {', '.join(size['over_400']) or 'none'}")
    print(f"knobs `crag config` lists: {size['knobs']}; README: {size['readme']} lines")
    home = args.home or Path(tempfile.mkdtemp(prefix="crag-bench-layout-"))
    env = {**os.environ, "CRAG_HOME": str(home), "LANGSMITH_TRACING": "false"}
    crag = str(Path(sys.executable).with_name("crag"))
    ctx = Context()
    for folder, collection in (
        ("library", ctx.store.collection),
        ("external", ctx.search.external_collection),
    ):
        _run([crag, "ingest", str(SAMPLES / folder), "--collection", collection, "-q"], env)
    lines = SAMPLES.joinpath("questions.jsonl").read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line)["question"] for line in lines if line.strip()]
    union: set[tuple[str, int]] = set()
    print(f"\n{'files':>5} {'functions':>9} {'lines':>6}  question (fresh process, from aask)")
    for question in questions[: args.questions]:
        row = json.loads(_run([sys.executable, __file__, "--trace", question], env))
        ran = {(f, n) for f, numbers in row["files"].items() for n in numbers}
        union |= ran
        print(f"{len(row['files']):>5} {row['functions']:>9} {len(ran):>6}  {question[:60]}")
    files = {f for f, _ in union}
    print(f"\nall of them: {len(files)} runtime files, {len(union):,} lines of functions that ran")
    if args.files:
        held = {f: len((RUNTIME / f).read_text(encoding="utf-8").splitlines()) for f in files}
        ran_in = {f: sum(1 for g, _ in union if g == f) for f in files}
        print(f"\n{'ran':>5} {'held':>5}  file (the runtime files the questions ran)")
        for f in sorted(files):
            print(f"{ran_in[f]:>5} {held[f]:>5}  {f}")
        print(f"{len(union):>5} {sum(held.values()):>5}  in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
