"""Labelled (question, passage, relevant) pairs generated from a library.

Generated pairs are for users with no labels: the chat model writes a question that
a sampled chunk answers (a positive), and the chunks the retriever ranks highest for
that question, from other pages, become hard negatives. Generation is seeded, shows
progress, and appends each chunk's pairs to a cache file as soon as they exist, so an
interrupted run resumes where it stopped and a finished one is never redone.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from crag.context import Context
from crag.retrieval.library import tenant_records
from crag_lab import prompts
from crag_lab.dataset import Pair


def by_question(pairs: Iterable[Pair]) -> dict[str, list[Pair]]:
    """Pairs grouped by question: the grader scores one question's passages together."""
    groups: dict[str, list[Pair]] = {}
    for pair in pairs:
        groups.setdefault(pair["qid"], []).append(pair)
    return groups


Chunk = dict[str, Any]  # id, text, metadata
Neighbours = Callable[[str, int], list[Chunk]]  # (query, k) -> retrieved chunks, best first


def _load_cache(path: Path) -> dict[str, list[Pair]]:
    done: dict[str, list[Pair]] = {}
    if not path.exists():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line cut short by an interruption: that chunk is redone
        done[row["chunk_id"]] = [Pair(**p) for p in row["pairs"]]  # type: ignore[typeddict-item]
    return done


def write_question(model: BaseChatModel, passage: str) -> str:
    """One question the passage answers, in the model's words (first line only)."""
    reply = model.invoke(
        [
            SystemMessage(prompts.QUESTION_WRITER_SYSTEM),
            HumanMessage(prompts.QUESTION_WRITER_USER.format(passage=passage[:1500])),
        ]
    )
    text = str(reply.content).strip().splitlines()
    question = text[0].strip().strip('"') if text else ""
    return question if question.endswith("?") and 10 <= len(question) <= 300 else ""


def generate_pairs(
    chunks: list[Chunk],
    model: BaseChatModel,
    neighbours: Neighbours,
    cache: Path,
    *,
    count: int,
    negatives: int = 2,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> list[Pair]:
    """`count` positives (and hard negatives) from chunks sampled with `seed`."""
    rng = random.Random(seed)
    usable = sorted((c for c in chunks if len(c["text"]) >= 300), key=lambda c: str(c["id"]))
    order = rng.sample(usable, k=min(len(usable), count * 2))  # spare for failed ones
    done = _load_cache(cache)
    cache.parent.mkdir(parents=True, exist_ok=True)
    pairs: list[Pair] = []
    made = 0
    with cache.open("a", encoding="utf-8") as out:
        for chunk in order:
            if made >= count:
                break
            cid = str(chunk["id"])
            if cid not in done:
                done[cid] = _pairs_for(chunk, model, neighbours, negatives)
                out.write(json.dumps({"chunk_id": cid, "pairs": done[cid]}))
                out.write("\n")
                out.flush()
            if done[cid]:
                pairs += done[cid]
                made += 1
            if progress:
                progress(made, count)
    return pairs


def _pairs_for(chunk: Chunk, model: BaseChatModel, neighbours: Neighbours, n: int) -> list[Pair]:
    question = write_question(model, chunk["text"])
    if not question:
        return []
    qid = f"gen:{chunk['id']}"
    pairs = [Pair(qid=qid, question=question, passage=chunk["text"], relevant=True)]
    here = (chunk["metadata"].get("source"), chunk["metadata"].get("page"))
    for hit in neighbours(question, n + 6):
        there = (hit["metadata"].get("source"), hit["metadata"].get("page"))
        if hit["id"] != chunk["id"] and there != here:
            pairs.append(Pair(qid=qid, question=question, passage=hit["text"], relevant=False))
        if len(pairs) > n:
            break
    return pairs


def library_chunks(ctx: Context, collection: str) -> list[Chunk]:
    """Every chunk of the tenant's library in a collection, with its text and metadata."""
    return [
        {"id": r.id, "text": r.text, "metadata": r.metadata}
        for r in tenant_records(ctx, collection, texts=True, page=500)
    ]
