"""The vectors of a retrieved chunk's strips: embedded the first time a question reads
the chunk, then remembered by the embedder.

Grading scores a candidate by its best strip and refinement scores every strip of the
graded chunks. Ingest does not embed strips: that doubled the cost of every chunk, and
most chunks no question reads. Retrieval embeds the strips of the chunks it returns
that the embedder does not know yet, in one call, and the embedder serves them to
grading and refinement from then on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from crag.directives import without_directives
from crag.models.remembering import Remembering
from crag.text import strips_of

#: Chunk metadata an earlier ingest wrote (the strips' vectors); retrieval drops it.
STRIPS_KEY = "strip_vectors"


def strip_texts(text: str, sentences: int) -> list[str]:
    """Every strip of `text` that a question may score: the grader's (of the chunk's
    text), then those refinement reads that differ (of the text without directives).
    The chunk itself is not among them: its vector is stored anyway."""
    plain = [s for s in dict.fromkeys(strips_of(text, sentences)) if s and s != text]
    extra = strips_of(without_directives(text), sentences)
    return [*plain, *(s for s in dict.fromkeys(extra) if s and s != text and s not in plain)]


def remember_strips(embedder: Remembering, texts: Sequence[str], sentences: int) -> int:
    """Have the embedder know the vectors of every strip of `texts`; returns how many it
    had to embed. They are kept at float16 precision (cosines move by < 0.001), as
    stores once kept them, so a score does not depend on when a strip was embedded."""
    strips = list(dict.fromkeys(s for t in texts for s in strip_texts(t, sentences)))
    todo = embedder.unknown(strips)
    if todo:
        vectors = embedder.embed_array(todo)
        embedder.remember(todo, vectors.astype(np.float16).astype(np.float32))
    return len(todo)
