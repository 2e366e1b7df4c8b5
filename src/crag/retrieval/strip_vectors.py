"""The vectors of a chunk's strips, made at ingest and kept in the chunk's metadata.

Grading scores a candidate by its best strip and refinement scores every strip of the
graded chunks; embedding those strips for each question was most of its cost. Ingest
embeds them once, beside the chunk (written with it, so a killed ingest leaves both or
neither), and retrieval hands them to the embedder with the chunk's own vector. A chunk
stored without them (an older store, other strip settings) is embedded at question time.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from crag.directives import without_directives
from crag.text import strips_of

#: Chunk metadata key: "<sentences per strip>:<strips>:<base64 of the float16 vectors>".
STRIPS_KEY = "strip_vectors"


def _plain(text: str, sentences: int) -> list[str]:
    return [s for s in dict.fromkeys(strips_of(text, sentences)) if s and s != text]


def strip_texts(text: str, sentences: int) -> list[str]:
    """Every strip of `text` that a question may score, in a fixed order: the grader's
    (of the chunk's text), then those refinement reads that differ (of the text without
    directives). The chunk itself is not among them: its vector is stored anyway."""
    plain = _plain(text, sentences)
    extra = strips_of(without_directives(text), sentences)
    return [*plain, *(s for s in dict.fromkeys(extra) if s and s != text and s not in plain)]


def encode(sentences: int, vectors: Sequence[Sequence[float]]) -> str:
    """The metadata value for these strip vectors (float16: cosines move by < 0.001)."""
    packed = np.asarray(vectors, dtype=np.float16).tobytes() if len(vectors) else b""
    return f"{sentences}:{len(vectors)}:{base64.b64encode(packed).decode('ascii')}"


def decode(value: object, sentences: int, count: int) -> np.ndarray | None:
    """The `count` vectors a metadata value holds, or None when it is missing, was made
    with other strip settings, or does not hold `count` of them."""
    if not isinstance(value, str) or not value.startswith(f"{sentences}:{count}:"):
        return None
    try:
        raw = base64.b64decode(value.split(":", 2)[2], validate=True)
    except ValueError:
        return None
    if len(raw) % 2:  # not whole float16 values
        return None
    flat = np.frombuffer(raw, dtype=np.float16)
    if count == 0:
        return np.zeros((0, 0), dtype=np.float32) if flat.size == 0 else None
    if flat.size == 0 or flat.size % count:
        return None
    return flat.reshape(count, -1).astype(np.float32)


def embedded(embed: Callable[[list[str]], list[list[float]]], texts: list[str]) -> list[Any]:
    """One vector per text, or an error: a vector lost or added would be stored beside
    another text."""
    vectors = embed(texts) if texts else []
    if len(vectors) != len(texts):
        raise RuntimeError(f"the embedder returned {len(vectors)} vectors for {len(texts)} texts")
    return vectors


def with_strip_vectors(
    texts: Sequence[str],
    sentences: int,
    embed: Callable[[list[str]], list[list[float]]],
    known: Sequence[Mapping[str, Any] | None] = (),
) -> list[str]:
    """The metadata value for each chunk text: reused from `known` (a stored chunk's
    metadata with the same text, or None) where it fits, else embedded in one call."""
    strips = [strip_texts(t, sentences) for t in texts]
    values: list[str | None] = [None] * len(texts)
    for i, meta in enumerate(known):
        stored = (meta or {}).get(STRIPS_KEY)
        if decode(stored, sentences, len(strips[i])) is not None:
            values[i] = str(stored)
    todo = [i for i, v in enumerate(values) if v is None]
    flat = [s for i in todo for s in strips[i]]
    vectors = embedded(embed, flat)
    start = 0
    for i in todo:
        values[i] = encode(sentences, vectors[start : start + len(strips[i])])
        start += len(strips[i])
    return [str(v) for v in values]


def stored_strips(
    texts: Sequence[str], metas: Sequence[Mapping[str, Any] | None], sentences: int
) -> tuple[list[str], list[np.ndarray]]:
    """The strips whose vectors these retrieved chunks carry, and those vectors."""
    strips: list[str] = []
    vectors: list[np.ndarray] = []
    for text, meta in zip(texts, metas, strict=True):
        if not meta or STRIPS_KEY not in meta:
            continue
        mine = _plain(text, sentences)  # most chunks give no orders: no more to read
        got = decode(meta[STRIPS_KEY], sentences, len(mine))
        if got is None:
            mine = strip_texts(text, sentences)
            got = decode(meta[STRIPS_KEY], sentences, len(mine))
        if got is not None:
            strips.extend(mine)
            vectors.extend(got)
    return strips, vectors
