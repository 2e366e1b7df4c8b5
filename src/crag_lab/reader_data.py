"""The reader's pairs: (question, text, label) built from the generated questions, and
the dev libraries' labelled pairs it is measured on.

Labels come from construction (crag_lab.construct): the chunk and the strips holding
the answering sentence are positive; the chunk with those sentences deleted, its strips
and same-document chunks without the answer are negative. Every negative but the last
kind shares the positive's topic and words, so a reader can only tell them apart by
whether the answer is there.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crag.text import split_sentences
from crag_lab.construct import read_rows

#: Sentences per strip, as refinement cuts them by default (`strip_sentences`).
STRIP_SENTENCES = 2
#: Negative strips kept per question (a chunk has 6-10 strips; most are alike).
NEGATIVE_STRIPS = 3
#: Other chunks of the document kept as negatives per question: mostly another topic,
#: which cosine already tells apart, and each costs a passage's training time.
OTHER_CHUNKS = 1


@dataclass(frozen=True)
class Pair:
    question: str
    text: str
    label: bool
    group: str  # pairs of one question share it: on-topic AUC compares within a group
    kind: str  # "passage" or "strip"


def load_generated(folder: Path) -> list[dict[str, Any]]:
    """The generated questions (questions.jsonl.gz), in file order."""
    rows, _ = read_rows(folder / "questions.jsonl.gz")
    return rows


def _strips(sentences: Sequence[str]) -> Iterator[tuple[range, str]]:
    for start in range(0, len(sentences), STRIP_SENTENCES):
        span = range(start, min(start + STRIP_SENTENCES, len(sentences)))
        yield span, " ".join(sentences[i] for i in span)


def pairs_of(row: Mapping[str, Any], rng: random.Random) -> list[Pair]:
    """One question's pairs: passages (the chunk, its deletion, other chunks) and strips
    (those holding an answering sentence, and a few that do not)."""
    q, group = row["question"], row["chunk_id"] + "|" + row["question"]
    answering = set(row["answer_sentences"])
    pairs = [Pair(q, row["chunk"], True, group, "passage")]
    pairs.append(Pair(q, row["negative"], False, group, "passage"))
    pairs += [Pair(q, other, False, group, "passage") for other in row["others"][:OTHER_CHUNKS]]
    positive: list[str] = [row["sentence"]]
    negative: list[str] = []
    for span, strip in _strips(split_sentences(row["chunk"])):
        (positive if answering.intersection(span) else negative).append(strip)
    negative += [s for _, s in _strips(split_sentences(row["negative"]))]
    negative = sorted(set(negative) - set(positive))
    rng.shuffle(negative)
    pairs += [Pair(q, s, True, group, "strip") for s in dict.fromkeys(positive)]
    pairs += [Pair(q, s, False, group, "strip") for s in negative[:NEGATIVE_STRIPS]]
    return pairs


def training_pairs(rows: Sequence[Mapping[str, Any]], seed: int = 0) -> list[Pair]:
    rng = random.Random(seed)
    return [p for row in rows for p in pairs_of(row, rng)]


def first_questions(rows: Sequence[Mapping[str, Any]], n: int, seed: int = 0) -> list[Any]:
    """`n` questions drawn in one fixed order, so a bigger training set holds every
    smaller one (the learning curve adds data, nothing else)."""
    order = list(rows)
    random.Random(seed).shuffle(order)
    return order[:n]


def split_unseen(
    rows: Sequence[Mapping[str, Any]], n: int, seed: int = 0
) -> tuple[list[Any], list[Any]]:
    """The last `n` questions of the fixed order, held out, and the rest to train on, less
    every question of a chunk held out: a chunk gives up to three questions, and its
    text is their positive, so a reader trained on one would have seen the others'."""
    ordered = first_questions(rows, len(rows), seed)
    unseen = ordered[-n:]
    held = {r["chunk_id"] for r in unseen}
    return unseen, [r for r in ordered[:-n] if r["chunk_id"] not in held]


def dev_pairs(path: Path) -> list[Pair]:
    """A dev library's labelled pairs (grader_pairs.jsonl)."""
    pairs = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                group = str(
                    r.get("qid") or r["question"]
                )  # optional, as `crag eval --pairs` reads it
                pairs.append(
                    Pair(r["question"], r["passage"], bool(r["relevant"]), group, "passage")
                )
    return pairs
