"""refine: CRAG knowledge refinement (decompose, filter, recompose).

Documents are cut into strips of a few sentences, every strip of the question is
scored in one batch, strips under the threshold are dropped (each document keeps its
best one), the best few kept, and the survivors rejoined in their original order.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from crag.context import Context
from crag.directives import without_directives
from crag.grading.registry import make_strip_grader
from crag.nodes.trail import context_of, note, recorded
from crag.state import Passage, State, Strip
from crag.text import strips_of

# Position = document rank * STRIDE + strip index, so sorting restores reading order.
STRIDE = 10_000


def knowledge_for(state: State, lower: float) -> list[Passage]:
    """Good library docs (correct), good external docs (incorrect), or both (ambiguous).

    External results count as good like library chunks: graded score >= lower.
    """
    verdict = state.get("verdict")
    good = list(state.get("good_docs") or [])
    web = [d for d in state.get("web_docs") or [] if d.get("score", 1.0) >= lower]
    if verdict == "correct":
        return good
    if verdict == "incorrect":
        return web
    return good + web


def position(rank: int, index: int) -> int:
    return rank * STRIDE + index


def strip_key(strip: Strip) -> tuple[str, int]:
    """(document id, strip index): a strip's identity whatever its document's rank."""
    return strip["doc_id"], strip["position"] % STRIDE


def decompose(docs: list[Passage], sentences_per_strip: int) -> list[Strip]:
    """Strips of each document, without the parts that give orders to a model: strips
    are all that the generator, the grounding check and an extractive answer read."""
    strips: list[Strip] = []
    for rank, doc in enumerate(docs):
        for i, text in enumerate(strips_of(without_directives(doc["text"]), sentences_per_strip)):
            strips.append(
                {"doc_id": doc["id"], "position": position(rank, i), "text": text, "score": 0.0}
            )
    return strips


def best_of_each_document(ranked: list[Strip]) -> list[Strip]:
    """The best strip of each document. Every document refined was graded relevant as a
    whole, so its best strip stays even when no strip alone reaches the threshold: a
    short strip scores lower than the passage it came from (measured on the dev set:
    answerable questions declined for an empty context 0.185 -> 0.148)."""
    seen: set[int] = set()
    best = []
    for strip in ranked:
        if (rank := strip["position"] // STRIDE) not in seen:
            seen.add(rank)
            best.append(strip)
    return best


def select(
    strips: list[Strip], threshold: float, max_strips: int, split_at: int | None = None
) -> list[Strip]:
    """Strips at or above the threshold and each document's best, the best `max_strips`
    of them, back in reading order.

    With `split_at` (the first external document's rank, on the ambiguous path), each
    side gets half the places before the rest go by score: the library answers part
    of the question and the web the rest, so neither may crowd the other out.
    """
    ranked = sorted(strips, key=lambda s: (-s["score"], s["position"]))
    passing = [s for s in ranked if s["score"] >= threshold]
    passing += [s for s in best_of_each_document(ranked) if s not in passing]
    best: list[Strip] = []
    if split_at is not None:
        for external in (False, True):
            side = [s for s in passing if (s["position"] >= position(split_at, 0)) == external]
            best += side[: max_strips // 2]
    best += [s for s in passing if s not in best][: max_strips - len(best)]
    return sorted(best, key=lambda s: s["position"])


@recorded
async def refine(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    docs = knowledge_for(state, ctx.lower)
    if not ctx.refine:  # whole documents, still without sentences that give orders
        whole: list[Strip] = [
            {"doc_id": d["id"], "position": position(r, 0), "text": text, "score": 1.0}
            for r, d in enumerate(docs)
            if (text := " ".join(strips_of(without_directives(d["text"]), 3)))
        ]
        return {"strips": whole, "kept_strips": whole, **note(f"off: {len(whole)} whole documents")}
    strips = decompose(docs, ctx.strip_sentences)
    grader = make_strip_grader(ctx)
    scores = await grader.ascore(state["question"], [s["text"] for s in strips])
    for strip, score in zip(strips, scores, strict=True):
        strip["score"] = round(score, 4)
    split_at = len(state.get("good_docs") or []) if state.get("verdict") == "ambiguous" else None
    kept = select(strips, ctx.strip_threshold, ctx.max_strips, split_at)
    return {
        "strips": strips,
        "kept_strips": kept,
        **note(f"kept {len(kept)} of {len(strips)} strips from {len(docs)} documents"),
    }
