"""Concurrent runs on `langgraph dev`: N threads at once on the sample library, the wall
time of the batch and p50/p95 of each run (request to final state), per setting of the
local model's slots (`local_slots`) and of the server's jobs per worker
(`--n-jobs-per-worker`, the `N_JOBS_PER_WORKER` of a deployment). Beside them: p95
against one run alone, the local model's generated tokens per second over the batch
(from crag's log line per model call), the prompt tokens it read per second (flat
across batch sizes where reading bounds a run), the order in which the runs finished
against the order they came, the slowest health check and thread listing meanwhile,
and what the server's log holds of logging errors, tracebacks and BlockingErrors.

    python benchmarks/bench_langgraph_dev.py                              # 100 threads, extractive
    python benchmarks/bench_langgraph_dev.py --chat-model local --slots 1,4   # 1,2,4,8 runs
    python benchmarks/bench_langgraph_dev.py --jobs-per-worker 1,2,10     # one server each

Each server first answers one warm-up run (loading the models), not counted; the answer
cache is off. No assertions: the figures depend on the CPU and on what else runs on it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import re
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from dev_server import (
    LOG_ERRORS,
    SAMPLES,
    DevServer,
    Run,
    concurrent_runs,
    dev_server,
    factoid_questions,
    have_cli,
    ingest_samples,
    questions_of,
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
    f"{'slots':>5} {'jobs/worker':>11} {'threads':>7} {'wall s':>7} {'p50 s':>6} {'p95 s':>6} "
    f"{'max s':>6} {'p95/alone':>9} {'gen tok/s':>9} {'read tok/s':>10} {'overtaken':>9} "
    f"{'/ok max s':>9} {'failed':>6}  finish order; server log"
)

#: crag's log line for each call of the local model (crag/models/llamacpp.py).
MODEL_CALL = re.compile(r"local model call: (\d+) prompt \+ (\d+) generated tokens")


def overtaken(order: list[int]) -> int:
    """The most runs that came after a run and finished before it (`order`: the runs'
    arrival numbers in the order they finished)."""
    done_at = {run: place for place, run in enumerate(order)}
    return max(
        (
            sum(1 for later in order if later > run and done_at[later] < done_at[run])
            for run in order
        ),
        default=0,
    )


async def probe(url: str, stop: asyncio.Event) -> float:
    """The slowest answer of the server's /ok (health) and thread search, every second."""
    import httpx

    slowest = 0.0
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        while not stop.is_set():
            started = time.perf_counter()
            (await client.get("/ok")).raise_for_status()
            (await client.post("/threads/search", json={"limit": 10})).raise_for_status()
            slowest = max(slowest, time.perf_counter() - started)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
    return slowest


async def watched(
    url: str, asked: list[str], timeout_s: float, alone: bool
) -> tuple[list[Run], float]:
    """`asked` run at once, 0.2 s apart in order (or `alone`, one after another), the
    server probed meanwhile."""
    stop = asyncio.Event()
    prober = asyncio.ensure_future(probe(url, stop))
    try:
        if alone:
            runs = [
                run for q in asked for run in await concurrent_runs(url, [q], timeout_s=timeout_s)
            ]
        else:
            runs = await concurrent_runs(url, asked, timeout_s=timeout_s, stagger_s=0.2)
    finally:
        stop.set()
    return runs, await prober


def batch(server: DevServer, label: str, asked: list[str], timeout_s: float,
          alone: float | None) -> float:  # fmt: skip
    """One row of the table: `asked` at once, or one after another when `alone` is None
    (the row `1 x N`); returns the runs' p95, or their median when alone."""
    start = server.log.stat().st_size
    started = time.perf_counter()
    runs, slowest = asyncio.run(watched(server.url, asked, timeout_s, alone is None))
    wall = time.perf_counter() - started
    with server.log.open("rb") as log:
        log.seek(start)
        calls = MODEL_CALL.findall(log.read().decode(errors="replace"))
    read, generated = (sum(int(call[i]) for call in calls) for i in (0, 1))
    seconds = [run.seconds for run in runs if run.error is None]
    failed = [run.error for run in runs if run.error]
    order = [i for i, _ in sorted(enumerate(runs), key=lambda pair: pair[1].ended)]
    found = server.log_errors()
    p95 = percentile(seconds, 95)
    ratio = f"{p95 / alone:9.2f}" if alone else f"{'':>9}"
    n = f"1 x {len(asked)}" if alone is None else str(len(asked))
    print(
        f"{label} {n:>7} {wall:7.1f} {percentile(seconds, 50):6.1f} {p95:6.1f} "
        f"{max(seconds, default=float('nan')):6.1f} {ratio} {generated / wall:9.2f} "
        f"{read / wall:10.1f} "
        f"{overtaken(order):>9} {slowest:9.2f} {len(failed):>6}  "
        f"{','.join(str(i + 1) for i in order)}; "
        + ", ".join(f"{len(found[word])} {word}" for word in LOG_ERRORS),
        flush=True,
    )
    for error in failed[:3]:
        print(f"{'':>11} failed: {error[:200]}")
    return p95 if alone is not None else percentile(seconds, 50)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--threads", type=positive_ints, default=None, metavar="N[,N...]",
        help="runs at once (default: 100; 1,2,4,8 with the local model)",
    )  # fmt: skip
    parser.add_argument("--chat-model", default="extractive", help="CRAG_CHAT_MODEL of the server")
    parser.add_argument(
        "--jobs-per-worker", type=positive_ints, default=[10], metavar="N[,N...]",
        help="the server's --n-jobs-per-worker (langgraph dev's default: 10)",
    )  # fmt: skip
    parser.add_argument(
        "--slots", type=positive_ints, default=None, metavar="N[,N...]",
        help="the server's local_slots (default: crag's)",
    )  # fmt: skip
    parser.add_argument("--timeout", type=float, default=1800, help="seconds for one batch")
    args = parser.parse_args()
    # killed, it still stops its server (the `with` blocks run on SystemExit)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not have_cli():
        parser.error("the `langgraph` command is missing: pip install -e '.[dev]'")
    local = args.chat_model == "local"
    threads = args.threads or ([1, 2, 4, 8] if local else [100])

    # With the local model each run asks a question no earlier run of its server asked
    # (the model would find a repeated prompt in its cache), all of one kind (answered from
    # the library), and `1` stands for three runs one after another; the answer cache is off.
    singles = local and threads[0] == 1
    if local:
        questions = factoid_questions("internal")
        questions += questions_of(SAMPLES / "questions.jsonl", "internal")
        threads = [3 if n == 1 else n for n in threads]
    else:
        questions = sample_questions() + factoid_questions()
    if local and 1 + sum(threads) > len(questions):
        parser.error(f"with the local model, at most {len(questions) - 1} runs per server")
    with tempfile.TemporaryDirectory(prefix="crag-bench-dev-") as tmp:
        home = ingest_samples(Path(tmp) / "home")
        print(f"langgraph dev, {args.chat_model} answers, the sample library's questions "
              "(runs 0.2 s apart; overtaken: the most runs that came after one and finished "
              f"before it)\n{HEADER}")  # fmt: skip
        for slots, jobs in itertools.product(args.slots or [0], args.jobs_per_worker):
            workdir = Path(tmp) / f"server-{slots}-{jobs}"
            workdir.mkdir()
            env = {**os.environ, "CRAG_CACHE": "false"}
            if slots:
                env["CRAG_LOCAL_SLOTS"] = str(slots)
            label = f"{slots or 'dflt':>5} {jobs:>11}"
            with dev_server(home, workdir, chat_model=args.chat_model, jobs_per_worker=jobs,
                            env=env, timeout_s=180) as server:  # fmt: skip
                (warm,) = asyncio.run(concurrent_runs(server.url, questions[:1], timeout_s=900))
                said = warm.error or "one run, models loading"
                print(f"{label} {'warm-up':>7} {warm.seconds:7.1f}  ({said})", flush=True)
                fresh = iter(questions[1:]) if local else itertools.cycle(questions)
                alone = None
                for i, n in enumerate(threads):
                    asked = list(itertools.islice(fresh, n))
                    if singles and i == 0:
                        alone = batch(server, label, asked, args.timeout, None)
                    else:
                        batch(server, label, asked, args.timeout, alone)
    return 0


if __name__ == "__main__":
    sys.exit(main())
