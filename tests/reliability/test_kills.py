"""Forced kills of a real `crag ingest` process at random moments, then a re-run: the
store must equal a clean ingest of the same files, chunk for chunk (ids, text, metadata,
vectors, and each chunk findable by its own vector), so no chunk is lost or duplicated.

Each run is `crag.cli.main.main(["ingest", ...])` in a subprocess with a slowed fake
embedder (writes in batches of 3 chunks, 0.08 s per batch), so a kill can land in any
phase: embedding, writing a batch, deleting an old version. The processes are started
before they are needed and wait for a "go", so their start-up (imports) overlaps.
Kill moments are random; the seed is in every failure message. Records "kill" kinds
and the "chunks lost" / "chunks duplicated" sums in the reliability tally.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes import FakeEmbeddings
from test_faults import stored, topic_doc, tried, write_library

from crag.context import Context
from crag.ingest.indexer import ingest_path
from crag.retrieval.clients import get_collection, open_client

CHUNKING = ("--chunk-size", "300", "--chunk-overlap", "50")
TOPICS = ("dropout", "attention", "convolution", "recurrence", "kernels")
#: Seconds the fake embedder takes per batch.
EMBED_DELAY = 0.08

RUNNER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {support!r})
    from fakes import FakeEmbeddings
    import chromadb  # imported before "ready", like everything else the run needs
    from crag.cli.main import main
    from crag.ingest import indexer

    class Slow(FakeEmbeddings):
        def embed_documents(self, texts):
            print("embedding", flush=True)
            time.sleep({delay})
            return super().embed_documents(texts)

    indexer.embeddings_for = lambda *args, **kwargs: Slow()
    indexer.Ingestor.__init__.__kwdefaults__["batch_size"] = 3
    print("ready", flush=True)
    sys.stdin.readline()
    sys.exit(main(sys.argv[1:]))
    """
)


class Run:
    """A `crag ingest` process, started now, that begins when told to."""

    def __init__(self, script: Path, library: Path, home: Path) -> None:
        argv = [sys.executable, str(script), "ingest", str(library), "--home", str(home)]
        self.proc = subprocess.Popen(
            [*argv, *CHUNKING, "-q"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            # Ctrl-C as a terminal delivers it, even where this suite was started in the
            # background (a non-interactive shell's `&` makes its jobs ignore SIGINT)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )

    def _line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline()

    def start(self) -> None:
        assert self._line().strip() == "ready", self.finish()
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def kill_at_random(self, rng: random.Random, sig: signal.Signals) -> int | None:
        """Once the first batch is being embedded, wait a random moment and send `sig`.
        Returns the exit code (negative: killed by that signal)."""
        line = self._line()
        assert line.strip() == "embedding", (line, self.finish())
        time.sleep(rng.uniform(0.0, 6 * EMBED_DELAY))
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        return self.proc.wait(timeout=60)

    def finish(self) -> str:
        """Run to the end (or reap); the process's stderr, for failure messages."""
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[Callable[[Path, Path], Run]]:
    """Start `crag ingest LIBRARY --home HOME` processes; any left over is killed."""
    script = tmp_path / "ingest_runner.py"
    tests = str(Path(__file__).resolve().parents[1])
    script.write_text(
        RUNNER.format(support=str(Path(tests) / "support"), delay=EMBED_DELAY), encoding="utf-8"
    )
    started: list[Run] = []

    def start(library: Path, home: Path) -> Run:
        started.append(Run(script, library, home))
        return started[-1]

    yield start
    for run in started:
        if run.proc.poll() is None:
            run.proc.kill()
        run.finish()


@pytest.fixture
def seed() -> int:
    """CRAG_KILL_SEED replays the kill moments of a failure (timing aside)."""
    return int(os.environ.get("CRAG_KILL_SEED") or int.from_bytes(os.urandom(4), "big"))


def _complete_versions(rows: dict[str, dict[str, Any]]) -> dict[str, set[str]]:
    """source -> the versions of it whose every chunk is in the store."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    size: dict[str, int] = {}
    for row in rows.values():
        meta = row["meta"]
        counts[meta["source"]][meta["version"]] += 1
        size[meta["version"]] = meta["chunks"]
    return {s: {v for v, n in c.items() if n == size[v]} for s, c in counts.items()}


def _compare(home: Path, clean: Path) -> tuple[int, int, list[str]]:
    """(chunks lost, chunks duplicated, ids whose text, metadata or vector differ)."""
    got, want = stored(home), stored(clean)
    lost = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    differ = sorted(cid for cid in set(got) & set(want) if got[cid] != want[cid])
    # the vector index too: every chunk must be found by its own vector
    collection = get_collection(open_client(Context(home=home)), "books")
    ids = sorted(set(got) & set(want))
    if ids:
        vectors = np.array([want[cid]["vector"] for cid in ids], dtype=np.float32)
        hits = collection.query(query_embeddings=vectors, n_results=min(3, len(got)))
        unfound = [cid for cid, found in zip(ids, hits["ids"], strict=True) if cid not in found]
        lost += unfound
    return len(lost), len(extra), differ


def _clean_ingest(library: Path, home: Path) -> int:
    ctx = Context(home=home, chunk_size=300, chunk_overlap=50)
    summary = ingest_path(ctx, library, embeddings=FakeEmbeddings())
    assert summary.exit_code == 0
    return summary.chunks_written


def _reingest(library: Path, home: Path) -> tuple[int, FakeEmbeddings]:
    fake = FakeEmbeddings()
    ctx = Context(home=home, chunk_size=300, chunk_overlap=50)
    return ingest_path(ctx, library, embeddings=fake).exit_code, fake


def _exact(tally: Any, home: Path, clean: Path, context: str) -> None:
    """The store equals the clean one; the figures go to the tally."""
    lost, duplicated, differ = _compare(home, clean)
    tally.add("chunks lost", lost)
    tally.add("chunks duplicated", duplicated)
    assert (lost, duplicated, differ) == (0, 0, []), context


def test_kills_at_random_moments_of_a_first_ingest(
    tmp_path: Path, runs: Callable[[Path, Path], Run], seed: int, tally: Any
) -> None:
    """kill -9, kill -9, SIGTERM: each run resumes what the last one left; a final run
    completes the store exactly and embeds only what was missing."""
    signals = [signal.SIGKILL, signal.SIGKILL, signal.SIGTERM]
    library = write_library(tmp_path / "lib", TOPICS, paragraphs=8)
    home = tmp_path / "home"
    pending = [runs(library, home) for _ in signals]
    total = _clean_ingest(library, tmp_path / "clean")
    rng = random.Random(seed)
    codes: list[int | None] = []
    kind = "kill -9 twice, then SIGTERM, at random moments of a first ingest"
    with tried(tally, "kill", kind):
        for run, sig in zip(pending, signals, strict=True):
            run.start()
            codes.append(run.kill_at_random(rng, sig))
            err = run.finish()
            assert "Traceback" not in err, err
        context = f"(seed {seed}, exit codes {codes})"
        assert codes[0] == -signal.SIGKILL, context  # the first run was killed mid-way
        kept = set(stored(home))
        assert 0 < len(kept) <= total, context
        code, fake = _reingest(library, home)
        assert code == 0, context
        _exact(tally, home, tmp_path / "clean", context)
        # only the missing chunks embedded
        missing = [r["text"] for cid, r in stored(tmp_path / "clean").items() if cid not in kept]
        assert fake.texts == len(missing), context


def test_kills_while_changed_files_are_replaced(
    tmp_path: Path, runs: Callable[[Path, Path], Run], seed: int, tally: Any
) -> None:
    """A changed file's new version is written before its old one is deleted: kills in
    the middle leave an extra partial version, which the next run completes and swaps in."""
    library = write_library(tmp_path / "lib", TOPICS, paragraphs=8)
    home = tmp_path / "home"
    first, *killed = [runs(library, home) for _ in range(3)]
    rng = random.Random(seed)
    codes: list[int | None] = []
    with tried(tally, "kill", "kill -9 twice while changed files are replaced"):
        first.start()
        err = first.finish()
        assert first.proc.returncode == 0, err
        # (this process opens the store only after the last run: a client opened here
        # earlier would not see what the other processes write)
        for topic in TOPICS[:3]:  # new versions: most chunks change, a few stay the same
            path = next(library.rglob(f"{topic}.md"))
            path.write_text(topic_doc(topic, 9, extra=f"Revised {topic}."), encoding="utf-8")
        _clean_ingest(library, tmp_path / "clean")
        for run in killed:
            run.start()
            codes.append(run.kill_at_random(rng, signal.SIGKILL))
            err = run.finish()
            assert "Traceback" not in err, err
        context = f"(seed {seed}, exit codes {codes})"
        assert codes[0] == -signal.SIGKILL, context
        # whatever the moment, every file still has a complete version in the store
        complete = _complete_versions(stored(home))
        for source in (p.relative_to(library).as_posix() for p in library.rglob("*.md")):
            assert complete.get(source), f"{source}: no complete version {context}"
        code, _ = _reingest(library, home)
        assert code == 0, context
        _exact(tally, home, tmp_path / "clean", context)


def test_ctrl_c_stops_an_ingest_cleanly_and_the_rerun_finishes(
    tmp_path: Path, runs: Callable[[Path, Path], Run], seed: int, tally: Any
) -> None:
    """SIGINT (Ctrl-C): the run stops between writes, says how to finish, exits 130."""
    library = write_library(tmp_path / "lib", TOPICS, paragraphs=8)
    home = tmp_path / "home"
    run = runs(library, home)
    _clean_ingest(library, tmp_path / "clean")
    with tried(tally, "kill", "SIGINT (Ctrl-C) mid-ingest: exit 130, then a re-run"):
        run.start()
        code = run.kill_at_random(random.Random(seed), signal.SIGINT)
        assert run.proc.stdout is not None
        out = run.proc.stdout.read()
        err = run.finish()
        context = f"(seed {seed}, exit code {code})"
        assert code == 130 and "Traceback" not in err, (context, err)
        assert "interrupted: re-run the same command to finish" in out
        assert _reingest(library, home)[0] == 0
        _exact(tally, home, tmp_path / "clean", context)
