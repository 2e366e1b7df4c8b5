"""A soak of `langgraph dev`: mixed questions for a stretch of time, the server's
resident memory sampled every minute.

The sample library's questions in turn (library, web, partial, decline, factoids,
conflicting sources), every third one followed on its thread by a follow-up,
`--concurrency` conversations at once. A conversation's thread is deleted when it ends
(`--keep-threads` keeps them: `langgraph dev` holds every thread in memory).
Each minute prints the server's resident memory (its process and its children), the
runs finished and failed; the end prints the memory after 10 minutes against the
last sample and what the server's log holds of logging errors, tracebacks and
BlockingErrors.

    python benchmarks/soak_langgraph_dev.py                          # 60 min, extractive
    python benchmarks/soak_langgraph_dev.py --chat-model local --minutes 15

A run fails when it raises, or ends without a verdict or an answer. No assertions:
the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
import dev_server as dev

#: Asked on the thread of the question before, as a person would follow up.
FOLLOW_UPS = (
    "And which port does the sync channel use?",
    "What about monthly plans?",
    "Does that also apply to the Team plan?",
)


def rss_mb(leader: int) -> float:
    """Resident memory of every process in `leader`'s session, in MB."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            session = int(stat.rsplit(")", 1)[1].split()[3])  # state ppid pgrp session
            if session != leader:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue  # a process that ended meanwhile
    return total / 1024


@dataclass
class Tally:
    runs: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)

    def record(self, values: object, error: str | None) -> None:
        self.runs += 1
        if error is None and not (
            isinstance(values, dict) and values.get("verdict") and values.get("answer")
        ):
            error = f"no verdict or answer in {str(values)[:120]}"
        if error is not None:
            self.failure(error)

    def failure(self, error: str) -> None:
        """A run or a thread's deletion that failed."""
        self.failed += 1
        self.errors.append(error)


async def conversation(url: str, questions: Iterator[str], tally: Tally, until: float,
                       timeout_s: float, keep: bool) -> None:  # fmt: skip
    """Threads one after another until `until`: a question, sometimes a follow-up."""
    from langgraph_sdk import get_client

    client = get_client(url=url, timeout=timeout_s)
    follow = itertools.cycle(FOLLOW_UPS)
    for turn in itertools.count():
        if time.monotonic() >= until:
            return
        thread = await client.threads.create()
        asked = [next(questions)] + ([next(follow)] if turn % 3 == 2 else [])
        for question in asked:
            try:
                values = await asyncio.wait_for(
                    client.runs.wait(thread["thread_id"], "crag", input={"question": question}),
                    timeout_s,
                )
            except Exception as exc:
                tally.record(None, f"{type(exc).__name__}: {exc}"[:300])
            else:
                tally.record(values, None)
        if not keep:
            try:
                await client.threads.delete(thread["thread_id"])
            except Exception as exc:
                tally.failure(f"deleting the thread: {type(exc).__name__}: {exc}"[:300])


def questions() -> Iterator[str]:
    """Every sample question in turn, forever."""
    conflicts = dev.questions_of(dev.SAMPLES / "conflicts" / "questions.jsonl")
    return itertools.cycle([*dev.sample_questions(), *dev.factoid_questions(), *conflicts])


async def soak(url: str, pid: int, minutes: float, concurrency: int, timeout_s: float,
               keep: bool) -> Tally:  # fmt: skip
    tally = Tally()
    asked = questions()
    started = time.monotonic()
    until = started + minutes * 60
    talks = [
        asyncio.ensure_future(conversation(url, asked, tally, until, timeout_s, keep))
        for _ in range(concurrency)
    ]
    samples: dict[int, float] = {0: rss_mb(pid)}
    print(f"{'minute':>6} {'RSS MB':>7} {'runs':>6} {'failed':>6}", flush=True)
    print(f"{0:>6} {samples[0]:7.0f} {0:>6} {0:>6}", flush=True)
    for minute in itertools.count(1):
        done, _ = await asyncio.wait(talks, timeout=started + minute * 60 - time.monotonic())
        samples[minute] = rss_mb(pid)
        print(f"{minute:>6} {samples[minute]:7.0f} {tally.runs:>6} {tally.failed:>6}", flush=True)
        if len(done) == len(talks):
            break
    for talk in talks:
        talk.result()  # a crash of the driver itself is raised, not hidden
    last = max(samples)
    if last >= 10:
        growth = samples[last] / samples[10] - 1
        print(f"resident memory: {samples[10]:.0f} MB after 10 min, {samples[last]:.0f} MB "
              f"after {last} ({growth:+.1%})")  # fmt: skip
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--chat-model", default="extractive", help="CRAG_CHAT_MODEL of the server")
    parser.add_argument("--concurrency", type=int, default=2, help="conversations at once")
    parser.add_argument("--timeout", type=float, default=900, help="seconds for one run")
    parser.add_argument("--keep-threads", action="store_true", help="do not delete threads")
    parser.add_argument("--server-log", type=Path, help="copy the server's log here at the end")
    args = parser.parse_args()
    # killed, it still stops its server (the `with` blocks run on SystemExit)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not dev.have_cli():
        parser.error("the `langgraph` command is missing: pip install -e '.[dev]'")
    if args.minutes <= 0 or args.concurrency < 1:
        parser.error("--minutes must be > 0 and --concurrency >= 1")

    with tempfile.TemporaryDirectory(prefix="crag-soak-") as tmp:
        home = dev.ingest_samples(Path(tmp) / "home")
        workdir = Path(tmp) / "server"
        workdir.mkdir()
        with dev.dev_server(home, workdir, chat_model=args.chat_model, timeout_s=180) as server:
            print(f"langgraph dev, {args.chat_model} answers, {args.concurrency} conversations "
                  f"at once for {args.minutes:g} min", flush=True)  # fmt: skip
            tally = asyncio.run(soak(server.url, server.pid, args.minutes, args.concurrency,
                                     args.timeout, args.keep_threads))  # fmt: skip
            found = server.log_errors()
            if args.server_log:
                shutil.copyfile(server.log, args.server_log)
        print(f"runs: {tally.runs}, failed: {tally.failed}; server log: "
              + ", ".join(f"{len(found[word])} {word}" for word in dev.LOG_ERRORS))  # fmt: skip
        for error in tally.errors[:5]:
            print(f"  failed: {error}")
        for word in dev.LOG_ERRORS:
            for line in found[word][:3]:
                print(f"  log: {line[:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
