"""Answer cache benchmark: a cache hit's latency against a full run, from one run.

The bundled sample library is ingested into a fresh home with the real local
embeddings; crag answers with the extractive model (no LLM) and the feature grader.
Each question is asked once with an empty cache (a full run, whose confident answer is
stored), then again as written and in other words (the cache hits), and one question
the cache has no answer for measures what a lookup adds to a miss. A run with a
language model costs seconds more per full run and nothing more per hit.

No assertions: figures depend on the CPU and on what else runs on it.

    .venv/bin/python benchmarks/bench_cache.py
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

SAMPLES = Path(__file__).resolve().parents[1] / "samples"

#: (question, the same question in other words), about the sample library.
QUESTIONS = [
    (
        "How long do I have to ask for a full refund of an annual Lumen subscription?",
        "For an annual Lumen subscription, how long do I have to ask for a full refund?",
    ),
    (
        "Which port does the Lumen WebSocket sync channel use?",
        "The Lumen WebSocket sync channel uses which port?",
    ),
    (
        "How many requests per minute may an access token make to the Lumen API?",
        "How many requests per minute may one access token make to the Lumen API?",
    ),
    (
        "What does the Lumen Team plan cost per user per month?",
        "Per user per month, what does the Lumen Team plan cost?",
    ),
    (
        "How many attachment uploads per hour does the Lumen API allow?",
        "How many attachment uploads does the Lumen API allow per hour?",
    ),
    ("Where is the Lumen configuration file?", "Where is the configuration file of Lumen?"),
    (
        "What processing fee applies to a prorated Lumen refund?",
        "What processing fee applies to prorated Lumen refunds?",
    ),
    (
        "How do I contact Lumen billing for a refund?",
        "For a refund, how do I contact Lumen billing?",
    ),
]
MISS = "What happens when a Lumen access token exceeds the rate limit?"


def _timed(question: str, ctx: Any) -> tuple[float, dict[str, Any]]:
    from crag.api import ask

    started = time.perf_counter()
    state = ask(question, context=ctx)
    return time.perf_counter() - started, dict(state)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=None, help="a folder to ingest into")
    args = parser.parse_args()
    from crag.offline import use_offline_defaults

    use_offline_defaults()
    from crag import cache
    from crag.context import Context
    from crag.ingest.indexer import ingest_path

    with tempfile.TemporaryDirectory(prefix="crag-bench-cache-") as tmp:
        home = args.home or Path(tmp) / "home"
        ctx = Context(home=home, chat_model="extractive", grader="features", cache=True)
        for folder, collection in (("library", "books"), ("external", "external")):
            assert ingest_path(ctx, SAMPLES / folder, collection=collection).exit_code == 0
        (home / cache.CACHE_FILE).unlink(missing_ok=True)
        _timed("Which port does the Lumen API use?", ctx.with_overrides(cache=False))  # warm

        rows = []
        for question, paraphrase in QUESTIONS:
            full, first = _timed(question, ctx)
            again, repeat = _timed(question, ctx)
            other, reworded = _timed(paraphrase, ctx)
            rows.append((full, first, again, repeat, other, reworded))
        print(f"answer cache, {len(QUESTIONS)} questions of the sample library")
        print("  (extractive answers, feature grader, local MiniLM embeddings)\n")
        print(f"  {'full run s':>10}  {'hit s':>7}  {'other words s':>13}  question")
        for (full, _, again, repeat, other, reworded), (question, _) in zip(
            rows, QUESTIONS, strict=True
        ):
            hit = f"{again:7.3f}" if repeat.get("cached") else "   miss"
            para = f"{other:13.3f}" if reworded.get("cached") else f"{'miss':>13}"
            stored = "" if repeat.get("cached") else " (not stored)"
            print(f"  {full:10.3f}  {hit}  {para}  {question[:60]}{stored}")
        fulls = [r[0] for r in rows]
        hits = [r[2] for r in rows if r[3].get("cached")]
        hits += [r[4] for r in rows if r[5].get("cached")]
        reworded_hits = sum(bool(r[5].get("cached")) for r in rows)
        print(f"\n  full runs: median {statistics.median(fulls):.3f} s over {len(fulls)}")
        if hits:
            print(
                f"  cache hits: median {statistics.median(hits):.3f} s over {len(hits)} "
                f"({statistics.median(fulls) / statistics.median(hits):.0f}x faster); "
                f"in other words: {reworded_hits}/{len(rows)} hit"
            )
        # what a lookup adds to a question the cache cannot answer
        ctx_off = ctx.with_overrides(cache=False)
        lookups = []
        for _ in range(20):
            started = time.perf_counter()
            assert cache.lookup(ctx, MISS) is None
            lookups.append(time.perf_counter() - started)
        miss, _ = _timed(MISS, ctx_off)
        print(
            f"  a lookup that misses ({cache.entries(ctx)} entries): median "
            f"{statistics.median(lookups) * 1000:.1f} ms, against a full run of {miss:.3f} s"
        )


if __name__ == "__main__":
    main()
