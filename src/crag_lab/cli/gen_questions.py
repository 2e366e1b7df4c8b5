"""`crag gen-questions`: the reader's training questions, written by the local model.

Each chunk of the training corpora (crag_lab.corpora) gets up to three questions with
answers known by construction (crag_lab.construct). The run is resumable: chunks
already tried are skipped, and Ctrl-C or SIGTERM writes what is done before it exits.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from crag.cli.options import positive_int
from crag.context import Context
from crag_lab import prompts
from crag_lab.construct import (
    CHUNK_OVERLAP,
    CHUNK_SIZE,
    Attempt,
    Candidate,
    Row,
    append_rows,
    candidates,
    holds,
    open_store,
    read_rows,
    rebuild,
    rows_from_reply,
    tokens,
)
from crag_lab.corpora import CORPORA, corpora

NAME = "gen-questions"
HELP = "write the reader's training questions with the local model (resumable)"
PROMPT_VERSION = "fact-questions-v1"
MAX_TOKENS = 220


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", type=Path, default=Path("train/reader"), help="folder of the data set"
    )
    parser.add_argument(
        "--target", type=positive_int(1), default=5000, help="stop at this many questions"
    )
    parser.add_argument(
        "--corpora",
        default=",".join(CORPORA),
        help=f"comma-separated training corpora (default: all of {', '.join(CORPORA)})",
    )
    parser.add_argument("--seed", type=int, default=0, help="the order chunks are taken in")
    parser.add_argument(
        "--slots", type=positive_int(1), default=2, help="chunks the model reads at once"
    )
    parser.add_argument(
        "--threads", type=positive_int(0), default=0, help="CPU threads (0: all cores)"
    )
    parser.add_argument(
        "--batch", type=positive_int(1), default=8, help="chunks per write to the data set"
    )
    parser.add_argument(
        "--sample",
        type=positive_int(1),
        default=0,
        metavar="N",
        help="print N rows drawn at random (with --seed) for a person to check, then stop",
    )
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="build every row again from the replies kept in attempts.jsonl.gz under "
        "today's checks (no model call), then stop",
    )


def _model(args: argparse.Namespace, ctx: Context) -> Any:
    from crag.models.llamacpp import LlamaCppChatModel
    from crag.models.model_files import GGUF_NAME, ensure_local_gguf

    path = ensure_local_gguf(ctx.models.model_cache)
    args.settings = {
        "model": GGUF_NAME,
        "prompt": PROMPT_VERSION,
        "temperature": 0.0,
        "max_tokens": MAX_TOKENS,
        "chunk_size": CHUNK_SIZE,
        "chunk_overlap": CHUNK_OVERLAP,
        "seed": args.seed,
    }
    return LlamaCppChatModel(
        model_path=str(path),
        threads=args.threads or ctx.models.threads,
        slots=args.slots,
        max_tokens=MAX_TOKENS,
        temperature=0.0,
    )


def _ask(model: Any, cand: Candidate) -> Attempt:
    from langchain_core.messages import HumanMessage, SystemMessage

    t0 = time.monotonic()
    reply = model.invoke(
        [
            SystemMessage(prompts.FACT_QUESTIONS_SYSTEM),
            HumanMessage(prompts.FACT_QUESTIONS_USER.format(passage=cand.text)),
        ]
    )
    text = str(reply.content)
    rows, refused = rows_from_reply(cand, text)
    return Attempt(cand, text, rows, refused, time.monotonic() - t0)


def _rebuild(questions: Path, attempts: Path) -> int:
    """Both files written anew (beside, then moved over the old ones)."""
    tried = open_store(attempts)
    if not tried:
        print(f"nothing to rebuild: no attempts in {attempts}", file=sys.stderr)
        return 1
    kept, rows = rebuild(tried, CORPORA)
    for path, new in ((questions, rows), (attempts, kept)):
        spare = path.with_suffix(".new")
        spare.unlink(missing_ok=True)
        spare.touch()
        append_rows(spare, new)
        spare.replace(path)
    dropped = f" ({len(tried) - len(kept)} chunks changed since, to ask again)" * (
        len(kept) < len(tried)
    )
    print(f"{len(rows)} questions from {len(kept)} chunks in {questions}{dropped}")
    return 0


def _sample(questions: Path, n: int, seed: int) -> int:
    """Rows to read: is the question answered by its sentence alone, and is the answer
    gone from the deletion negative? (The second is also checked here, by its words.)"""
    rows, _ = read_rows(questions)  # only reads: a run may be writing the file now
    if not rows:
        print(f"no questions in {questions}", file=sys.stderr)
        return 1
    drawn = random.Random(seed).sample(range(len(rows)), min(n, len(rows)))
    for k, i in enumerate(drawn, 1):
        row = rows[i]
        left = holds(row["negative"], tokens(row["answer"]))
        print(f"--- {k}. row {i} ({row['corpus']}, located by {row.get('located', 'span')})")
        print(f"Q: {row['question']}\nA: {row['answer']}\nS: {row['sentence']}")
        print(f"the answer as written is in the negative: {'yes' if left else 'no'}")
    return 0


def run(args: argparse.Namespace) -> int:
    chosen = corpora([n.strip() for n in args.corpora.split(",") if n.strip()])
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    questions, attempts = out / "questions.jsonl.gz", out / "attempts.jsonl.gz"
    if args.rebuild:
        return _rebuild(questions, attempts)
    if args.sample:
        return _sample(questions, args.sample, args.seed)
    have = open_store(questions)
    tried = {r["chunk_id"] for r in open_store(attempts)} | {r["chunk_id"] for r in have}
    made = len(have)
    if made >= args.target:
        print(f"{made} questions in {questions}: the target ({args.target}) is met")
        return 0
    model = _model(args, Context())
    todo: Iterator[Candidate] = (
        c for c in candidates(chosen, args.seed) if c.chunk_id not in tried
    )
    print(
        f"{made} questions so far, {len(tried)} chunks tried; writing to {questions} "
        f"({args.slots} at once; Ctrl-C stops cleanly)",
        file=sys.stderr,
    )
    rows: list[Row] = []
    records: list[Row] = []
    started, done_chunks, made_now = time.monotonic(), 0, 0

    def flush() -> None:
        append_rows(questions, [{**r, "settings": args.settings} for r in rows])
        append_rows(attempts, records)
        rows.clear()
        records.clear()

    def collect(finished: set[Future[Attempt]]) -> None:
        nonlocal done_chunks, made_now
        for future in finished:
            attempt = future.result()
            rows.extend(attempt.rows)
            records.append(attempt.record(args.settings))
            done_chunks += 1
            made_now += len(attempt.rows)

    # Ctrl-C and SIGTERM only ask the loop to stop: a write is never cut between the
    # questions and their attempts (a raising handler can land between the two).
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    pool = ThreadPoolExecutor(args.slots)
    running: set[Future[Attempt]] = set()
    try:
        while not stop.is_set():
            while len(running) < args.slots and made + made_now < args.target:
                cand = next(todo, None)
                if cand is None:
                    break
                running.add(pool.submit(_ask, model, cand))
            if not running:
                break
            finished, running = wait(running, timeout=1.0, return_when=FIRST_COMPLETED)
            collect(finished)
            if len(records) >= args.batch:
                flush()
                rate = (time.monotonic() - started) / max(1, made_now)
                left = args.target - made - made_now
                print(
                    f"{made + made_now}/{args.target} questions, {done_chunks} chunks "
                    f"this run, {rate:.1f} s a question, ETA {left * rate / 3600:.1f} h",
                    file=sys.stderr,
                    flush=True,
                )
        if stop.is_set():
            print("stopping: writing what is done", file=sys.stderr)
            collect({f for f in running if f.done() and not f.exception()})
    finally:
        flush()
        pool.shutdown(wait=False, cancel_futures=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(f"{made + made_now} questions in {questions}")
    return 0
