"""Ingest benchmark: the whole evaluation library into a throw-away store.

Prints pages/s, chunks/s, the share of wall time spent inside the embedding
model, the same chunks embedded alone by the same model (the speed limit of an
ingest here) with the ingest's speed as a share of it, peak RSS, and the time of
a second (unchanged) run as a fraction of the first. With `--against REF`, the
same books are also ingested by the code of git revision REF, side by side.

Every ingest runs in a fresh process (this tree's `src/`, or REF's). A shared
machine drifts by several percent from one minute to the next, so `--rounds`
repeats the measurements in turn (the embedder alone, then both ingests, in an
order that alternates) and the ratios are taken within each round, then their
median. No assertions: figures depend on the CPU and on what else runs on it.

    .venv/bin/python benchmarks/bench_ingest.py [--books DIR] [--threads N] [--quiet]
        [--against REF] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BOOKS = ROOT / "eval" / "d2l" / "books"


def _rss_mb() -> float:
    # ru_maxrss is in KiB on Linux (bytes on macOS)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _embedder_alone(ctx: Any, texts: list[str]) -> tuple[float, str]:
    """Seconds for the ingest's embedder to embed `texts` in the ingest's batch size,
    nothing else running: what no ingest of these chunks can beat here; and what ran it
    (the local embedder's runtime, else the embeddings spec)."""
    from crag.ingest.indexer import BATCH_SIZE
    from crag.models.embeddings import embeddings_for

    embed = embeddings_for(ctx).inner  # not the remembering wrapper: the ingest must not reuse
    embed.embed_documents(texts[:1])  # the model loaded outside the timing
    started = time.perf_counter()
    for i in range(0, len(texts), BATCH_SIZE):
        embed.embed_documents(texts[i : i + BATCH_SIZE])
    seconds = time.perf_counter() - started
    return seconds, str(getattr(embed, "runtime", ctx.models.embeddings))


def _arithmetic(texts: list[str]) -> float:
    """GFLOP of all-MiniLM-L6-v2 over `texts` (6 layers, width 384, feed-forward 1536):
    the matrix products per word piece, and attention's, which grows with length."""
    import numpy as np

    from crag.models.minilm import load_tokenizer

    n = np.array([len(e.ids) for e in load_tokenizer().encode_batch(texts)], dtype=np.float64)
    width, ffn, layers = 384, 1536, 6
    per_layer = 2 * (4 * width * width + 2 * width * ffn) * n + 4 * width * n * n
    return float(layers * per_layer.sum() / 1e9)


def _matmul_rate() -> float:
    """GFLOP/s of a float32 matrix product (numpy, every core), best of eleven: the
    arithmetic speed the embedder's matrix products can approach here."""
    import numpy as np

    a = np.random.default_rng(0).random((1024, 1024), dtype=np.float32)
    best = 0.0
    for _ in range(11):
        started = time.perf_counter()
        a @ a
        best = max(best, 2 * 1024**3 / (time.perf_counter() - started) / 1e9)
    return best


def _ingest_twice(books: Path, threads: int, quiet: bool) -> dict[str, Any]:
    """An ingest into a throw-away store by whichever `crag` this process imports, then
    the same again (nothing changed): the child's side of `_ingest_by`."""
    from crag.context import Context
    from crag.ingest.indexer import ingest_path
    from crag.ingest.progress import Progress

    with tempfile.TemporaryDirectory(prefix="crag-bench-") as home:
        ctx = Context(home=Path(home), threads=threads)
        cpu = time.process_time()
        first = ingest_path(ctx, books, on_event=Progress(quiet=quiet))
        cpu = time.process_time() - cpu
        second = ingest_path(ctx, books, on_event=Progress(quiet=True))
    return {
        "ok": first.exit_code == 0,
        "error": first.error,
        "seconds": first.seconds,
        "embed_seconds": first.embed_seconds,
        "chunks": first.chunks_written,
        "pages": first.pages,
        "cpu": cpu,
        "rss_mb": _rss_mb(),
        "again_seconds": second.seconds,
        "again_unchanged": second.files_unchanged,
        "again_embedded": second.chunks_embedded,
    }


def _ingest_by(ref: str | None, args: argparse.Namespace) -> dict[str, Any]:
    """The ingest by this tree's code (`ref` None) or git revision `ref`'s, its src/ in a
    fresh process."""
    with tempfile.TemporaryDirectory(prefix="crag-bench-src-") as tree:
        src = ROOT / "src"
        if ref is not None:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", ref, "src"], capture_output=True, check=True
            )
            subprocess.run(["tar", "-x", "-C", tree], input=archive.stdout, check=True)
            src = Path(tree) / "src"
        child = [sys.executable, __file__, "--books", str(args.books), "--ingest-only"]
        child += ["--threads", str(args.threads), *(["--quiet"] if args.quiet else [])]
        env = {**os.environ, "PYTHONPATH": str(src)}
        done = subprocess.run(child, env=env, stdout=subprocess.PIPE, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--books", type=Path, default=DEFAULT_BOOKS)
    parser.add_argument("--threads", type=int, default=0, help="embedder threads (0 = all)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--against", metavar="REF", help="also ingest with revision REF's code")
    parser.add_argument("--rounds", type=int, default=3, help="measurements of each (default 3)")
    parser.add_argument("--ingest-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.books.is_dir():
        print(f"no books at {args.books}", file=sys.stderr)
        return 2
    from crag.offline import use_offline_defaults

    use_offline_defaults()
    os.environ.pop("CRAG_CHROMA_URL", None)
    import logging

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    if args.ingest_only:  # a child of `_ingest_by`: one JSON line
        print(json.dumps(_ingest_twice(args.books, args.threads, args.quiet)))
        return 0

    from crag.context import Context
    from crag.ingest.chunking import chunk_pages
    from crag.ingest.discovery import discover
    from crag.ingest.loaders import load_document

    files = discover(args.books).files
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"library: {args.books} ({len(files)} files)")
    print(f"cpus: {cpus}, load average before: {os.getloadavg()[0]:.2f} (shared machine)")

    # Extraction + chunking alone, to separate PDF work from model work.
    started = time.perf_counter()
    pages = 0
    texts: list[str] = []
    for path in files:
        doc = load_document(path)
        pages += doc.page_count
        texts += [c.text for c in chunk_pages(doc.pages, doc.kind, 900, 150)]
    extract_s = time.perf_counter() - started
    print(
        f"extract+chunk only: {pages} pages, {len(texts)} chunks in {extract_s:.2f} s "
        f"({pages / extract_s:.0f} pages/s)"
    )

    codes: list[str | None] = [None] if args.against is None else [None, args.against]
    rounds: list[dict[str, Any]] = []
    runtime = ""
    for n in range(max(1, args.rounds)):
        alone, runtime = _embedder_alone(Context(threads=args.threads), texts)
        ran: dict[str, Any] = {"alone": alone}
        for ref in codes if n % 2 == 0 else codes[::-1]:  # neither always goes first
            run = _ingest_by(ref, args)
            if not run["ok"]:
                print(f"the ingest by {ref or 'this tree'} failed: {run['error']}")
                return 1
            ran[ref or ""] = run
        rounds.append(ran)
        mine = ran[""]
        line = f"round {n + 1}: embedder alone {alone:.1f} s, this tree {mine['seconds']:.1f} s"
        if args.against:
            line += f", {args.against} {ran[args.against]['seconds']:.1f} s"
        print(line, flush=True)

    first, alone = rounds[0][""], rounds[0]["alone"]
    t1 = first["seconds"]
    print(f"\nthe same chunks embedded alone: {alone:.1f} s ({len(texts) / alone:.1f} chunks/s)")
    if Context().models.embeddings == "local":
        work, rate = _arithmetic(texts), _matmul_rate()
        print(
            f"  its arithmetic ({runtime}): {work:,.0f} GFLOP at {work / alone:.0f} GFLOP/s, "
            f"{work / alone / rate:.0%} of a float32 matrix product's {rate:.0f} GFLOP/s here"
        )
    print(f"first ingest: {first['pages']} pages, {first['chunks']} chunks in {t1:.1f} s")
    print(f"  pages/s:  {first['pages'] / t1:.1f}")
    print(f"  chunks/s: {first['chunks'] / t1:.1f}")
    print(
        f"  inside the embedding model: {first['embed_seconds']:.1f} s "
        f"({first['embed_seconds'] / t1:.0%} of wall time)"
    )
    print(f"  process CPU time: {first['cpu']:.1f} s ({first['cpu'] / t1:.2f} cores busy)")
    print(f"  peak RSS: {first['rss_mb']:.0f} MB")
    print(
        f"re-run (unchanged): {first['again_unchanged']}/{len(files)} unchanged, "
        f"{first['again_embedded']} embedded, {first['again_seconds']:.2f} s "
        f"= {first['again_seconds'] / t1:.4f} x first run"
    )

    shares = [r["alone"] / r[""]["seconds"] for r in rounds]
    print(
        f"\nagainst the embedder alone, by round: {', '.join(f'{x:.0%}' for x in shares)}; "
        f"median {statistics.median(shares):.0%} of its speed"
    )
    if args.against:
        ref = args.against
        print("\nside by side, same books (each ingest in a fresh process), median of rounds:")
        print(f"  {'code':<16}{'seconds':>9}{'chunks/s':>10}{'pages/s':>9}")
        for name, key in (("this tree", ""), (ref, ref)):
            sec = statistics.median([r[key]["seconds"] for r in rounds])
            rates = f"{first['chunks'] / sec:>10.1f}{first['pages'] / sec:>9.1f}"
            print(f"  {name:<16}{sec:>9.1f}{rates}")
        ratios = [r[ref]["seconds"] / r[""]["seconds"] for r in rounds]
        print(
            f"  this tree is {statistics.median(ratios):.2f}x as fast as {ref} (by round: "
            f"{', '.join(f'{x:.2f}' for x in ratios)})"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
