"""Questions whose answers are known by construction: the reader's training data.

The chat model reads one chunk of a training corpus and writes questions, each with a
short answer copied from the chunk. The labels come from construction, not a judge:
the chunk holding the answer is a positive; the same chunk with every sentence that
holds the answer deleted is an on-topic negative (same topic and words, no answer);
chunks of the same document without the answer are further negatives.

Rows go to a gzip JSONL file (one row per question) and every chunk tried to an
attempts file, each appended as gzip members, so a killed run loses at most its last
batch and a new run resumes where the last one stopped.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crag.context import Store
from crag.ingest.chunking import chunk_pages
from crag.ingest.loaders import Page
from crag.text import folded_words, split_sentences
from crag_lab.corpora import Corpus

CHUNK_SIZE, CHUNK_OVERLAP = Store().chunk_size, Store().chunk_overlap  # as crag ingests
CHUNKS_PER_VISIT = 2  # a document gives this many chunks, then the next document's turn
MAX_ANSWER_WORDS = 16  # longer, and an answer is located by the sentence it restates
MAX_RESTATED_WORDS = 40
OTHERS = 3  # same-document negatives kept per question

Row = dict[str, Any]


# --- the gzip JSONL store -----------------------------------------------------------
def read_rows(path: Path) -> tuple[list[Row], int]:
    """The rows of every complete gzip member, and the byte length they span (a member
    cut short by a kill, and anything after it, is not read)."""
    if not path.exists():
        return [], 0
    data, rows, pos = path.read_bytes(), [], 0
    while pos < len(data):
        member = zlib.decompressobj(wbits=31)
        try:
            text = member.decompress(data[pos:])
        except zlib.error:
            break
        if not member.eof:
            break
        rows += [json.loads(line) for line in text.decode("utf-8").splitlines() if line]
        pos = len(data) - len(member.unused_data)
    return rows, pos


def append_rows(path: Path, rows: list[Row]) -> None:
    """Append rows as one gzip member (written whole, then synced)."""
    if not rows:
        return
    body = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    blob = packer.compress(body.encode("utf-8")) + packer.flush()
    with path.open("ab") as out:
        out.write(blob)
        out.flush()


def open_store(path: Path) -> list[Row]:
    """Rows so far; a torn tail left by a kill is cut off so that appends stay readable."""
    rows, good = read_rows(path)
    if path.exists() and path.stat().st_size > good:
        with path.open("r+b") as f:
            f.truncate(good)
    return rows


# --- chunks to ask about ------------------------------------------------------------
@dataclass
class Candidate:
    corpus: str
    document: str
    chunk_id: str
    text: str
    others: list[str] = field(repr=False)  # the document's other chunks


def is_prose(text: str) -> bool:
    """Sentences a question can be asked of: three or more, mostly words, not a listing."""
    sentences = split_sentences(text)
    visible = re.sub(r"\s", "", text)
    letters = sum(c.isalpha() for c in visible)
    words = len(text.split())
    return (
        len(text) >= 400
        and len(sentences) >= 3
        and letters >= 0.7 * max(1, len(visible))
        and words / len(sentences) >= 7
    )


def _chunks(text: str) -> list[str]:
    pages = [Page(1, None, text)]
    return [c.text for c in chunk_pages(pages, "text", CHUNK_SIZE, CHUNK_OVERLAP)]


def candidates(corpora: list[Corpus], seed: int = 0) -> Iterator[Candidate]:
    """Chunks taken in turn from each corpus; within one, `CHUNKS_PER_VISIT` from each
    document in a seeded order, then round again, until every prose chunk is taken."""
    rng = random.Random(seed)
    streams = [_corpus_stream(c, rng.randrange(1 << 30)) for c in corpora]
    while streams:
        for stream in list(streams):
            item = next(stream, None)
            if item is None:
                streams.remove(stream)
            else:
                yield item


def _corpus_stream(corpus: Corpus, seed: int) -> Iterator[Candidate]:
    rng = random.Random(seed)
    files = corpus.files()
    rng.shuffle(files)
    picked: dict[Path, list[int]] = {}  # a document's prose chunks, in a seeded order
    texts: dict[Path, list[str]] = {}
    visit = 0
    while files:
        for path in list(files):
            if path not in texts:
                chunks = _chunks(corpus.text(path))
                order = [i for i, c in enumerate(chunks) if is_prose(c)]
                random.Random(f"{seed}:{path}").shuffle(order)
                texts[path], picked[path] = chunks, order
            turn = picked[path][visit * CHUNKS_PER_VISIT : (visit + 1) * CHUNKS_PER_VISIT]
            if not turn:
                files.remove(path)
                texts.pop(path)
                continue
            chunks = texts[path]
            for i in turn:
                yield Candidate(
                    corpus.name,
                    path.as_posix(),
                    f"{corpus.name}:{path.as_posix()}#{i}",
                    chunks[i],
                    [c for j, c in enumerate(chunks) if j != i],
                )
        visit += 1


# --- reading the model's reply, building the rows -----------------------------------
_PAIR = re.compile(r"^\s*Q\d*[:.]\s*(.+?)\s*\n\s*A\d*[:.]\s*(.+?)\s*$", re.M)
_LOOKS_AT_PASSAGE = re.compile(
    r"\b(passage|excerpt|the (above|given) \w+|this (text|section|document|page|chapter|"
    r"paragraph))\b",
    re.I,
)


def parse_reply(reply: str) -> list[tuple[str, str]]:
    """(question, answer) pairs from `Q: ...` / `A: ...` lines."""
    return [(q.strip(), a.strip()) for q, a in _PAIR.findall(reply)]


def tokens(text: str) -> tuple[str, ...]:
    """Words and numbers as crag compares them: quotes, markup and spacing do not hide a
    match."""
    return tuple(folded_words(text))


def holds(text: str | tuple[str, ...], span: tuple[str, ...]) -> bool:
    """Whether the span's tokens stand in the text, in order and side by side."""
    words = tokens(text) if isinstance(text, str) else text
    n = len(span)
    return n > 0 and any(words[i : i + n] == span for i in range(len(words) - n + 1))


def restated(sentences: list[str], question: str, span: tuple[str, ...]) -> tuple[int, list[int]]:
    """Where an answer the model did not copy stands: the one sentence holding three
    quarters of the answer's words that the question does not already hold, and every
    sentence holding half of them (all deleted from the negative). (-1, []) if none."""
    new = set(span) - set(tokens(question))
    if len(new) < 2:
        return -1, []
    cover = [len(new & set(tokens(s))) / len(new) for s in sentences]
    best = max(range(len(sentences)), key=cover.__getitem__)
    if cover[best] < 0.75:
        return -1, []
    return best, [i for i, c in enumerate(cover) if c >= 0.5]


def build_row(cand: Candidate, question: str, answer: str) -> Row | str:
    """The row for one written question, or why it is refused. A short answer is found
    as written (`located`: span); a long or reworded one by the sentence it restates
    (`located`: sentence)."""
    span = tokens(answer)
    if not span or len(span) > MAX_RESTATED_WORDS:
        return "answer length"
    if not question.endswith("?") or len(question.split()) < 4:
        return "not a question"
    if _LOOKS_AT_PASSAGE.search(question):
        return "names the passage"
    if holds(question, span):
        return "answer in question"
    sentences = split_sentences(cand.text)
    asked = set(tokens(question))
    holding = [i for i, s in enumerate(sentences) if holds(s, span)]
    if holding and len(span) <= MAX_ANSWER_WORDS:
        located = "span"
        best = max(holding, key=lambda i: len(asked & set(tokens(sentences[i]))))
    else:
        located = "sentence"
        best, holding = restated(sentences, question, span)
        if best < 0:
            return "answer length" if len(span) > MAX_ANSWER_WORDS else "answer not in chunk"
    if len(holding) == len(sentences):
        return "answer in every sentence"
    negative = " ".join(s for i, s in enumerate(sentences) if i not in holding)
    if located == "span" and holds(negative, span):
        return "answer across sentences"
    answer_words = set(tokens(sentences[best])) - asked if located == "sentence" else set()

    def lacks(other: str) -> bool:
        if located == "span":
            return not holds(other, span)
        return len(answer_words & set(tokens(other))) < 0.75 * len(answer_words)

    others = [o for o in cand.others if lacks(o)]
    others.sort(key=lambda o: -len(asked & set(tokens(o))))
    return {
        "corpus": cand.corpus,
        "document": cand.document,
        "chunk_id": cand.chunk_id,
        "question": question,
        "answer": answer.strip(),
        "located": located,
        "sentence": sentences[best],
        "sentence_index": best,
        "answer_sentences": holding,
        "chunk": " ".join(sentences),  # spaced as the negative is: only the answer differs
        "negative": negative,
        "others": others[:OTHERS],
    }


@dataclass
class Attempt:
    """One chunk asked about: the rows it gave and why the rest were refused."""

    cand: Candidate
    reply: str  # kept, so that the rows can be built again under other checks
    rows: list[Row]
    refused: list[str]
    seconds: float

    def record(self, settings: dict[str, Any]) -> Row:
        return {
            "chunk_id": self.cand.chunk_id,
            "chunk_sha": chunk_sha(self.cand.text),
            "corpus": self.cand.corpus,
            "accepted": len(self.rows),
            "refused": self.refused,
            "reply": self.reply,
            "seconds": round(self.seconds, 2),
            "settings": settings,
        }


def rows_from_reply(cand: Candidate, reply: str) -> tuple[list[Row], list[str]]:
    rows: list[Row] = []
    refused: list[str] = []
    seen: set[tuple[str, ...]] = set()
    pairs = parse_reply(reply)
    if not pairs:
        return [], ["no questions"]
    for question, answer in pairs:
        built = build_row(cand, question, answer)
        if isinstance(built, str):
            refused.append(built)
        elif tokens(question) in seen or tokens(answer) in seen:
            refused.append("repeated")
        else:
            seen |= {tokens(question), tokens(answer)}
            rows.append(built)
    return rows, refused


def chunk_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def candidate_of(
    chunk_id: str, corpora: dict[str, Corpus], read: dict[str, list[str]] | None = None
) -> Candidate:
    """The chunk an id names, cut again from its document (chunking is deterministic);
    `read` keeps the documents already cut, by path."""
    corpus, _, rest = chunk_id.partition(":")
    path, _, index = rest.rpartition("#")
    read = {} if read is None else read
    if path not in read:
        read[path] = _chunks(corpora[corpus].text(Path(path)))
    chunks = read[path]
    i = int(index)
    if i >= len(chunks):
        raise ValueError(f"{chunk_id}: the document has {len(chunks)} chunks now")
    return Candidate(corpus, path, chunk_id, chunks[i], [c for j, c in enumerate(chunks) if j != i])


def rebuild(attempts: list[Row], corpora: dict[str, Corpus]) -> tuple[list[Row], list[Row]]:
    """Every attempt again under today's checks, from the reply it kept: (attempts, rows).
    An attempt whose chunk is no longer the text the model read (the package changed) is
    dropped, so that its chunk is asked about again."""
    kept: list[Row] = []
    rows: list[Row] = []
    read: dict[str, list[str]] = {}
    for attempt in attempts:
        try:
            cand = candidate_of(attempt["chunk_id"], corpora, read)
        except (ValueError, OSError):
            continue
        if attempt.get("chunk_sha", chunk_sha(cand.text)) != chunk_sha(cand.text):
            continue
        new, refused = rows_from_reply(cand, attempt["reply"])
        kept.append({**attempt, "accepted": len(new), "refused": refused})
        rows += [{**r, "settings": attempt["settings"]} for r in new]
    return kept, rows
