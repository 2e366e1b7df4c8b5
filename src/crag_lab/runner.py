"""Run the systems over the questions and the grader over the labelled pairs.

Systems take turns question by question (not system by system), so a slow spell
of a shared machine lands on all of them alike and latency ratios stay fair.
Configuration errors (no collection, no model) stop the run at once; any other
failure of one question is recorded as an error on that question and the run goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from crag.api import aask
from crag.context import Context
from crag.errors import CragError
from crag.grading.registry import make_grader
from crag.models.embeddings import embeddings_for
from crag.retrieval.clients import get_collection, open_client
from crag.retrieval.library import retrieve
from crag_lab.baselines import BASELINES
from crag_lab.dataset import Pair, Question
from crag_lab.oracle import CURRENT
from crag_lab.progress import Bar
from crag_lab.records import failed_record, record_from_state

log = logging.getLogger(__name__)

Runner = Callable[[str, Context], Awaitable[dict[str, Any]]]

#: crag judged on relevance alone, as before the composite confidence: documents and
#: strips ordered by the grader's scores, no conflict resolution, the library first.
RELEVANCE_ONLY: dict[str, Any] = {
    "weight_relevance": 1.0,
    "weight_completeness": 0.0,
    "weight_recency": 0.0,
    "weight_authority": 0.0,
    "timely_recency_weight": 0.0,
    "conflicts": "off",
    "source_priority": "internal-first",
}

#: Systems that are crag's graph with other settings.
VARIANTS: dict[str, dict[str, Any]] = {
    # crag on relevance alone: composite weights (1, 0, 0, 0), no conflict resolution
    "crag-relevance": RELEVANCE_ONLY,
    # crag's pipeline with plain embedding similarity as the grader
    "similarity": {"grader": "similarity"},
    # crag's pipeline with the feature evaluator (a logistic model over the batch) as
    # the grader
    "features": {"grader": "features"},
    # crag's pipeline with a perfect reader: the question's labels (`crag_lab.oracle`)
    "oracle": {"grader": "oracle"},
}


async def crag_system(question: str, ctx: Context) -> dict[str, Any]:
    started = time.perf_counter()
    state = await aask(question, context=ctx)
    return record_from_state(state, time.perf_counter() - started)


RUNNERS: dict[str, Runner] = {"crag": crag_system, **BASELINES}
SYSTEMS = ("crag", *VARIANTS, *BASELINES)


def base_system(label: str) -> str:
    """`crag/no-fast-path` → `crag`: a label names a system, then optionally a variant."""
    return label.partition("/")[0]


def runner_of(label: str) -> Runner:
    base = base_system(label)
    return RUNNERS["crag" if base in VARIANTS else base]


def system_context(label: str, ctx: Context) -> Context:
    """The context a system runs with: `ctx` plus the system's own settings."""
    return ctx.with_overrides(**VARIANTS.get(base_system(label), {}))


def parse_systems(raw: str) -> list[str]:
    names = [s.strip() for s in raw.split(",") if s.strip()]
    unknown = [s for s in names if s not in SYSTEMS]
    if unknown or not names:
        raise ValueError(f"unknown system(s) {unknown}; choose from {', '.join(SYSTEMS)}")
    return list(dict.fromkeys(names))


def warm_up(ctx: Context) -> None:
    """Open the store and load the embedder before any clock starts; fail fast if a
    collection is missing instead of recording the same error for every question."""
    retrieve(ctx, ctx.store.collection, "warm up", 1)
    if ctx.search.external == "local":
        get_collection(open_client(ctx), ctx.search.external_collection)


async def run_questions(
    questions: Sequence[Question],
    ctx: Context,
    systems: Sequence[str],
    bar: Bar,
    contexts: Mapping[str, Context] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """One record per (system, question), in question order. Each system runs with its
    context in `contexts` (thresholds fitted for it, say), else with `system_context`."""
    await asyncio.to_thread(warm_up, ctx)
    records: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
    runs = {s: (runner_of(s), (contexts or {}).get(s) or system_context(s, ctx)) for s in systems}
    for q in questions:
        CURRENT.set(q)  # the oracle reads its labels
        for system in systems:
            runner, sctx = runs[system]
            embeddings_for(sctx).forget_queries()  # no system reuses another's question vector
            started = time.perf_counter()
            try:
                record = await runner(q["question"], sctx)
            except CragError:  # configuration: the same for every question
                raise
            except Exception as exc:
                log.warning("%s failed on %s: %s", system, q["id"], exc)
                record = failed_record(q["question"], exc, time.perf_counter() - started)
            record.update(
                id=q["id"],
                system=system,
                category=q["category"],
                expected_verdict=q["expected_verdict"],
            )
            records[system].append(record)
            bar.advance(f"{system} {q['id']}")
    return records


async def score_pairs(
    pairs: Sequence[Pair], ctx: Context, bar: Bar, in_library: Sequence[bool]
) -> list[float]:
    """The run's grader on every labelled pair, each passage scored among the passages
    crag would grade it with: the chunks retrieval returns for its question, from the
    library (`in_library`) or else from the external collection. Batch-aware features
    (consensus, lift) see realistic neighbours this way, not the other labelled passages.
    """
    graders = {library: make_grader(ctx, library=library) for library in (False, True)}
    neighbours: dict[tuple[str, bool], list[str]] = {}
    scores = []
    for pair, library in zip(pairs, in_library, strict=True):
        key = (pair["question"], library)
        if key not in neighbours:
            collection = ctx.store.collection if library else ctx.search.external_collection
            hits = await asyncio.to_thread(
                retrieve, ctx, collection, pair["question"], ctx.retrieval.k
            )
            neighbours[key] = [h["text"] for h in hits]
        batch = [pair["passage"], *(t for t in neighbours[key] if t != pair["passage"])]
        scores.append(float((await graders[library].ascore(pair["question"], batch))[0]))
        bar.advance(pair["qid"])
    return scores
