"""Start-up benchmark: what a command costs before it does any work.

Times whole processes, interleaved run by run so that the machine's drift hits each
alike: `python -c pass` (the interpreter alone), `crag --help`, `crag ask --help`, and
an unchanged re-ingest of the dev books into a store that already holds them. Prints
the median and range of each, and each median as a multiple of `python -c pass`. No
assertions: figures depend on the CPU and on what else runs on it.

    .venv/bin/python benchmarks/bench_startup.py [--runs N] [--books DIR] [--home DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_BOOKS = Path(__file__).resolve().parents[1] / "eval" / "d2l" / "books"


def _seconds(argv: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-500:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="counted runs of each (default 7)")
    parser.add_argument("--books", type=Path, default=DEFAULT_BOOKS, help="the dev books")
    parser.add_argument("--home", type=Path, default=None, help="a store of them (else a new one)")
    args = parser.parse_args()
    crag = str(Path(sys.executable).with_name("crag"))
    home = args.home or Path(tempfile.mkdtemp(prefix="crag-bench-startup-"))
    ingest = [crag, "ingest", str(args.books), "--home", str(home), "-q"]
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "crag --help": [crag, "--help"],
        "crag ask --help": [crag, "ask", "--help"],
    }
    if args.books.is_dir():
        print(f"ingesting {args.books} into {home} once (not counted)", file=sys.stderr)
        _seconds(ingest)
        commands["unchanged re-ingest"] = ingest
    else:
        print(f"no books at {args.books}: the re-ingest is left out", file=sys.stderr)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():  # one warm-up each: the disk cache, not the code
        _seconds(argv)
    for _ in range(args.runs):
        for name, argv in commands.items():
            times[name].append(_seconds(argv))
    base = statistics.median(times["python -c pass"])
    print(f"\nstart-up, {args.runs} interleaved runs each ({os.cpu_count()} CPUs)")
    print(f"  {'command':<22} {'median s':>9} {'min s':>7} {'max s':>7}  × python -c pass")
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"  {name:<22} {median:9.3f} {min(runs):7.3f} {max(runs):7.3f}  {median / base:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
