"""CRAG benchmark: what crag's extra steps cost, as ratios from one run.

1. crag wall time / naive RAG wall time, per crag verdict path, on the same questions
   with the same store and models (systems interleaved question by question);
2. judge grading of k documents as one concurrent batch (`JudgeGrader.ascore` on k
   docs) vs a loop of k single-document calls (needs a chat model; skipped with
   --no-llm or --skip-judge);
3. ingest throughput on the two smallest books: pages/s and the share of wall time
   spent inside the embedding model (a small version of bench_ingest.py, whose
   logic lives in its `main`).

No assertions: figures depend on the CPU and on what else runs on it.

    .venv/bin/python benchmarks/bench_crag.py --home /tmp/evalhome --no-llm
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

EVAL = Path(__file__).resolve().parents[1] / "eval" / "d2l"


def _env() -> None:
    from crag.offline import use_offline_defaults

    use_offline_defaults()


def crag_vs_naive(ctx: Any, questions_file: Path, limit: int) -> None:
    from crag_lab.dataset import load_questions, stratified
    from crag_lab.progress import Bar
    from crag_lab.runner import run_questions

    questions = stratified(load_questions(questions_file), limit)
    # one question first, off the clock: models, the store and the library's index load
    asyncio.run(run_questions(questions[:1], ctx, ["crag", "naive"], Bar(2, "warm", quiet=True)))
    bar = Bar(2 * len(questions), "crag+naive", quiet=True)
    records = asyncio.run(run_questions(questions, ctx, ["crag", "naive"], bar))
    by_path: dict[str, list[tuple[float, float]]] = {}
    for crag, naive in zip(records["crag"], records["naive"], strict=True):
        by_path.setdefault(str(crag["verdict"]), []).append((crag["seconds"], naive["seconds"]))
    answers = f"{ctx.models.chat_model} answers"
    print(f"\n1. crag / naive RAG wall time ({len(questions)} questions, {answers})")
    print(
        f"   {'crag verdict':<12} {'n':>3}  {'crag mean s':>11}  {'naive mean s':>12}  ratio"
        f"  {'crag p50 s':>10}  {'naive p50 s':>11}  ratio"
    )
    pairs_all = [p for rows in by_path.values() for p in rows]
    for verdict, rows in [*sorted(by_path.items()), ("all", pairs_all)]:
        crag_mean = statistics.fmean(c for c, _ in rows)
        naive_mean = statistics.fmean(n for _, n in rows)
        crag_p50 = statistics.median(c for c, _ in rows)
        naive_p50 = statistics.median(n for _, n in rows)
        print(
            f"   {verdict:<12} {len(rows):>3}  {crag_mean:11.3f}  {naive_mean:12.3f}  "
            f"{crag_mean / naive_mean:4.1f}x  {crag_p50:10.3f}  {naive_p50:11.3f}  "
            f"{crag_p50 / naive_p50:4.1f}x"
        )


def judge_batching(ctx: Any, docs: int) -> None:
    from crag.grading.judge import JudgeGrader
    from crag.models.chat import make_chat_model
    from crag.retrieval.library import retrieve

    question = "How does dropout regularise a neural network?"
    passages = [h["text"] for h in retrieve(ctx, ctx.store.collection, question, docs)]
    model = make_chat_model(ctx.models.judge_model or ctx.models.chat_model, ctx)
    judge = JudgeGrader(model, max_concurrency=4)
    asyncio.run(judge.ascore(question, passages[:1]))  # load the model outside the clock

    async def batched(grader: JudgeGrader) -> float:
        start = time.perf_counter()
        await grader.ascore(question, passages)
        return time.perf_counter() - start

    async def sequential() -> float:
        start = time.perf_counter()
        for passage in passages:
            await judge.ascore(question, [passage])
        return time.perf_counter() - start

    t_batch = asyncio.run(batched(judge))
    t_one = asyncio.run(batched(JudgeGrader(model, max_concurrency=1)))
    t_loop = asyncio.run(sequential())
    judge_name = ctx.models.judge_model or ctx.models.chat_model
    print(f"\n2. judge grading of {len(passages)} documents ({judge_name})")
    print(f"   one ascore call, 4 concurrent:      {t_batch:.2f} s")
    print(f"   one ascore call, 1 at a time:       {t_one:.2f} s")
    print(f"   loop of single-document calls:      {t_loop:.2f} s")
    print(f"   loop / 4 concurrent: {t_loop / t_batch:.2f}x")
    print(f"   loop / 1 at a time:  {t_loop / t_one:.2f}x")


def ingest_share(books: Path, count: int) -> None:
    from crag.context import Context
    from crag.ingest.indexer import ingest_path

    chosen = sorted(books.glob("*.pdf"), key=lambda p: p.stat().st_size)[:count]
    with tempfile.TemporaryDirectory(prefix="crag-bench-") as tmp:
        folder = Path(tmp) / "books"
        folder.mkdir()
        for book in chosen:
            shutil.copy(book, folder / book.name)
        summary = ingest_path(Context(home=Path(tmp) / "home"), folder)
    secs = summary.seconds
    print(f"\n3. ingest of {', '.join(b.name for b in chosen)}")
    print(f"   {summary.pages} pages, {summary.chunks_written} chunks in {secs:.1f} s")
    print(f"   pages/s: {summary.pages / secs:.1f}; chunks/s: {summary.chunks_written / secs:.1f}")
    print(f"   inside the embedding model: {summary.embed_seconds / secs:.0%} of wall time")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=None, help="store with books + external")
    parser.add_argument("--questions", type=Path, default=EVAL / "questions.jsonl")
    parser.add_argument("--limit", type=int, default=30, help="questions (round-robin)")
    parser.add_argument("--no-llm", action="store_true", help="similarity + extractive answers")
    parser.add_argument("--skip-judge", action="store_true", help="skip the judge batching part")
    parser.add_argument("--judge-docs", type=int, default=5)
    parser.add_argument("--books", type=Path, default=EVAL / "books")
    parser.add_argument("--ingest-books", type=int, default=2)
    parser.add_argument("--parts", default="1,2,3", help="which figures, e.g. 2 or 1,3")
    args = parser.parse_args()
    _env()
    import logging

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    from crag.context import Context

    ctx = Context().with_overrides(home=args.home, cache=False)  # the graph, not the cache
    if args.no_llm:
        ctx = ctx.with_overrides(chat_model="extractive", grader="similarity")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"store: {ctx.store.home}; cpus: {cpus}; load average: {os.getloadavg()[0]:.2f}")
    parts = {p.strip() for p in args.parts.split(",")}
    if "1" in parts:
        crag_vs_naive(ctx, args.questions, args.limit)
    if "2" in parts and (args.no_llm or args.skip_judge):
        print("\n2. judge batching: skipped (no language model in this run)")
    elif "2" in parts:
        judge_batching(ctx, args.judge_docs)
    if "3" in parts:
        ingest_share(args.books, args.ingest_books)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
