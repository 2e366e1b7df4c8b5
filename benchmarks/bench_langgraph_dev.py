"""Concurrent runs on `langgraph dev`: N threads at once on the sample library, the wall
time of the batch and p50/p95 of each run (request to final state), per setting of the
server's jobs per worker (`--n-jobs-per-worker`, the `N_JOBS_PER_WORKER` of a
deployment); and what the server's log holds of logging errors, tracebacks and
BlockingErrors.

    python benchmarks/bench_langgraph_dev.py                              # 100 threads, extractive
    python benchmarks/bench_langgraph_dev.py --chat-model local --threads 20
    python benchmarks/bench_langgraph_dev.py --jobs-per-worker 1,2,10     # one server each

Each server first answers one warm-up run (loading the models), not counted. No
assertions: the figures depend on the CPU and on what else runs on it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from dev_server import (
    LOG_ERRORS,
    DevServer,
    concurrent_runs,
    dev_server,
    have_cli,
    ingest_samples,
    sample_questions,
)


def positive_ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected whole numbers >= 1, comma-separated: {text!r}")
    return values


def percentile(values: list[float], q: int) -> float:
    """The q-th percentile (inclusive method: p50 of one value is that value)."""
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


HEADER = (
    f"{'jobs/worker':>11} {'threads':>7} {'wall s':>7} {'runs/s':>6} {'p50 s':>6} "
    f"{'p95 s':>6} {'max s':>6} {'failed':>6}  server log"
)


def batch(server: DevServer, jobs: int, questions: list[str], n: int, timeout_s: float) -> None:
    """`n` threads at once, the questions in turn; one row of the table."""
    asked = [questions[i % len(questions)] for i in range(n)]
    started = time.perf_counter()
    runs = asyncio.run(concurrent_runs(server.url, asked, timeout_s=timeout_s))
    wall = time.perf_counter() - started
    seconds = [run.seconds for run in runs if run.error is None]
    failed = [run.error for run in runs if run.error]
    found = server.log_errors()
    log = ", ".join(f"{len(found[word])} {word}" for word in LOG_ERRORS)
    print(
        f"{jobs:>11} {n:>7} {wall:7.1f} {n / wall:6.2f} {percentile(seconds, 50):6.2f} "
        f"{percentile(seconds, 95):6.2f} {max(seconds, default=float('nan')):6.2f} "
        f"{len(failed):>6}  {log}",
        flush=True,
    )
    for error in failed[:3]:
        print(f"{'':>11} failed: {error[:200]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=positive_ints, default=[100], metavar="N[,N...]")
    parser.add_argument("--chat-model", default="extractive", help="CRAG_CHAT_MODEL of the server")
    parser.add_argument(
        "--jobs-per-worker", type=positive_ints, default=[10], metavar="N[,N...]",
        help="the server's --n-jobs-per-worker (langgraph dev's default: 10)",
    )  # fmt: skip
    parser.add_argument("--timeout", type=float, default=1800, help="seconds for one batch")
    args = parser.parse_args()
    if not have_cli():
        parser.error("the `langgraph` command is missing: pip install -e '.[dev]'")

    questions = sample_questions()
    with tempfile.TemporaryDirectory(prefix="crag-bench-dev-") as tmp:
        home = ingest_samples(Path(tmp) / "home")
        print(f"langgraph dev, {args.chat_model} answers, the sample library "
              f"({len(questions)} questions in turn)\n{HEADER}")  # fmt: skip
        for jobs in args.jobs_per_worker:
            workdir = Path(tmp) / f"server-{jobs}"
            workdir.mkdir()
            with dev_server(
                home, workdir, chat_model=args.chat_model, jobs_per_worker=jobs, timeout_s=180
            ) as server:
                (warm,) = asyncio.run(concurrent_runs(server.url, questions[:1], timeout_s=600))
                said = warm.error or "one run, models loading"
                print(f"{jobs:>11} {'warm-up':>7} {warm.seconds:7.1f}  ({said})", flush=True)
                for n in args.threads:
                    batch(server, jobs, questions, n, args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
