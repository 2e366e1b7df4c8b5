"""`langgraph dev` on a library, for the tests and the benchmark: the server started
from a copy of `langgraph.json` in a folder of its own, its log kept, and concurrent
runs driven through langgraph-sdk as Studio would."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from processes import free_port, serving

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
#: What a server's log must never hold: the logging machinery's own error reports,
#: tracebacks of any kind, and blocking calls on the event loop.
LOG_ERRORS = ("Logging error", "Traceback", "BlockingError")


def cli() -> Path:
    """The `langgraph` command of this environment (langgraph-cli, in crag's `dev` extra)."""
    return Path(sys.executable).parent / "langgraph"


def have_cli() -> bool:
    return cli().exists()


def ingest_samples(home: Path) -> Path:
    """The sample library and its external pages ingested into `home`."""
    from crag.context import Context
    from crag.ingest.indexer import ingest_path

    ctx = Context(home=home)
    assert ingest_path(ctx, SAMPLES / "library", collection="books").exit_code == 0
    assert ingest_path(ctx, SAMPLES / "external", collection="external").exit_code == 0
    return home


def questions_of(path: Path, category: str | None = None) -> list[str]:
    """The questions of a question file (of one `category` only, if given)."""
    rows = [json.loads(line) for line in path.open() if line.strip()]
    return [row["question"] for row in rows if category in (None, row["category"])]


def sample_questions() -> list[str]:
    return questions_of(SAMPLES / "questions.jsonl")


def factoid_questions(category: str | None = None) -> list[str]:
    """Short questions on the sample library, one fact each."""
    return questions_of(SAMPLES / "factoids.jsonl", category)


@dataclass
class DevServer:
    url: str
    log: Path
    pid: int  # the server's process, leader of its session (its workers included)

    def log_errors(self) -> dict[str, list[str]]:
        """The log's lines holding each of `LOG_ERRORS` (none, for a healthy server)."""
        lines = self.log.read_text(errors="replace").splitlines()
        return {word: [line for line in lines if word in line] for word in LOG_ERRORS}


@contextmanager
def dev_server(
    home: Path,
    workdir: Path,
    *,
    chat_model: str = "extractive",
    jobs_per_worker: int | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 120,
) -> Iterator[DevServer]:
    """`langgraph dev --no-browser --no-reload` on `home`'s library, run from `workdir`
    (its `.langgraph_api` state and `server.log` stay there)."""
    config = json.loads((REPO / "langgraph.json").read_text())
    config["dependencies"] = [str(REPO)]
    config["graphs"] = {
        name: re.sub(r"^\./", f"{REPO}/", path) for name, path in config["graphs"].items()
    }
    (workdir / "langgraph.json").write_text(json.dumps(config))
    port = free_port()
    command = [str(cli()), "dev", "--no-browser", "--no-reload", "--port", str(port)]
    if jobs_per_worker is not None:
        command += ["--n-jobs-per-worker", str(jobs_per_worker)]
    server_env = {
        **(env if env is not None else os.environ),
        "CRAG_HOME": str(home),
        "CRAG_CHAT_MODEL": chat_model,
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "1",
        "PYTHONUNBUFFERED": "1",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    url = f"http://127.0.0.1:{port}"
    log = workdir / "server.log"
    with serving(
        command, f"{url}/ok", log, cwd=workdir, env=server_env, timeout_s=timeout_s
    ) as proc:
        yield DevServer(url, log, proc.pid)


@dataclass
class Run:
    question: str
    thread_id: str
    seconds: float
    values: dict[str, Any]
    error: str | None = None
    ended: float = 0.0  # time.perf_counter() when it finished


async def concurrent_runs(
    url: str, questions: list[str], *, timeout_s: float = 600, stagger_s: float = 0.0
) -> list[Run]:
    """One thread per question, all runs started at once (or `stagger_s` apart, in the
    order given); each run's wall time from its request to its final state, or the error
    it ended with (a run still going after `timeout_s` is cancelled and counts as failed)."""
    from langgraph_sdk import get_client

    client = get_client(url=url, timeout=timeout_s)

    async def one(question: str, turn: int) -> Run:
        thread = await client.threads.create()
        await asyncio.sleep(turn * stagger_s)
        started = time.perf_counter()
        try:
            values = await client.runs.wait(
                thread["thread_id"], "crag", input={"question": question}
            )
        except Exception as exc:
            values, error = {}, f"{type(exc).__name__}: {exc}"
        else:
            error = None if isinstance(values, dict) else f"returned {values!r}"
        ended = time.perf_counter()
        final = values if isinstance(values, dict) else {}
        return Run(question, thread["thread_id"], ended - started, final, error, ended)

    tasks = [asyncio.ensure_future(one(q, i)) for i, q in enumerate(questions)]
    await asyncio.wait(tasks, timeout=timeout_s)
    runs = []
    for question, task in zip(questions, tasks, strict=True):
        if task.done():
            runs.append(task.result())
        else:
            task.cancel()
            runs.append(Run(question, "", timeout_s, {}, f"no answer within {timeout_s:g} s"))
    return runs
