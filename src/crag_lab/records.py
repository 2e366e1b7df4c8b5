"""One record shape for every system, so one metrics code path measures them all.

A record is `crag.api.summary(state)` plus what the metrics need and the summary
leaves out: the final context (the strips handed to the generator, with the file
or page they came from), the candidates read before it (library chunks and search
results, with their text), token counts, and the wall time of the whole question.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from crag.api import summary
from crag.redact import scrub
from crag.state import Passage, State, Strip, documents_seen
from crag_lab.metrics import tokens


class ContextEntry(TypedDict):
    source: str
    origin: str
    page: str
    text: str
    score: float


def context_entries(kept: Sequence[Strip], docs: Sequence[Passage]) -> list[ContextEntry]:
    """The kept strips with their document's source, in context order."""
    by_id = {d["id"]: d for d in docs}
    entries: list[ContextEntry] = []
    for strip in kept:
        doc: Mapping[str, Any] = by_id.get(strip["doc_id"], {})
        entries.append(
            {
                "source": str(doc.get("source", "?")),
                "origin": str(doc.get("origin", "?")),
                "page": str(doc.get("page", "")),
                "text": strip["text"],
                "score": float(strip["score"]),
            }
        )
    return entries


def with_context(
    result: dict[str, Any],
    *,
    kept: Sequence[Strip],
    docs: Sequence[Passage],
    retrieved: Sequence[Passage],
    seconds: float,
) -> dict[str, Any]:
    """A summary-shaped dict completed into a record.

    `retrieved` is everything the system fetched (library chunks and web results);
    the compression ratio is context tokens over these tokens.
    """
    context = context_entries(kept, docs)
    return {
        **result,
        "context": context,
        # what the system read before refining: whether the evidence was there at all
        "candidates": [{"source": str(p.get("source", "?")), "text": p["text"]} for p in retrieved],
        "context_tokens": sum(tokens(e["text"]) for e in context),
        "retrieved_tokens": sum(tokens(p["text"]) for p in retrieved),
        "seconds": round(seconds, 4),
        "error": None,
    }


def record_from_state(
    state: State, seconds: float, retrieved: Sequence[Passage] | None = None
) -> dict[str, Any]:
    """A final state as a record; `retrieved` (default: every document seen) is what
    the compression ratio is measured against."""
    docs = documents_seen(state)
    return with_context(
        # the grades replay the verdict at other thresholds (`crag_lab.tuning.sweep`)
        {**summary(state), "grades": state.get("grades")},
        kept=state.get("kept_strips") or [],
        docs=docs,
        retrieved=docs if retrieved is None else retrieved,
        seconds=seconds,
    )


def failed_record(question: str, error: BaseException, seconds: float) -> dict[str, Any]:
    """A question a system could not run: counted as an error, never silently dropped."""
    return {
        "question": question,
        "verdict": None,
        "answer": "",
        "answered": False,
        "path": [],
        "timings": {},
        "context": [],
        "context_tokens": 0,
        "retrieved_tokens": 0,
        "seconds": round(seconds, 4),
        "error": scrub(f"{type(error).__name__}: {error}"),
    }
