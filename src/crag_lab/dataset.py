"""The labelled files of an evaluation set (schema of eval/d2l/README.md).

Loading checks the fields the metrics rely on, so a malformed line fails at the
start with its line number instead of as a KeyError half-way through a long run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import zip_longest
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

from crag.text import split_date_stamps

Category = Literal["internal", "external", "partial", "none"]
CATEGORIES: tuple[Category, ...] = ("internal", "external", "partial", "none")
#: Categories with something to find: support recall and containment are measured on these.
ANSWERABLE: tuple[Category, ...] = ("internal", "external", "partial")
VERDICTS = ("correct", "incorrect", "ambiguous")


class Support(TypedDict):
    corpus: str
    doc: str
    hint: str


class Question(TypedDict):
    id: str
    question: str
    category: Category
    expected_verdict: str
    answers: list[str]
    reference_answer: str
    support: list[Support]
    source: NotRequired[str]  # where its answer lives; see `crag_lab.protocol`
    # conflict sets: the value an answer must give, the overruled value it must not, and
    # whether the question's sources disagree at all (false: a control question)
    expect: NotRequired[list[str]]
    reject: NotRequired[list[str]]
    conflict: NotRequired[bool]


class Pair(TypedDict):
    qid: str
    question: str
    passage: str
    relevant: bool


def _read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    try:
        text = Path(path).read_bytes()
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{path}: is a folder, not a JSONL file") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror or exc})") from None
    for number, raw in enumerate(text.splitlines(), start=1):
        try:
            line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{path}:{number}: not UTF-8 text") from None
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: not JSON ({exc})") from exc
        if not isinstance(value, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object")
        rows.append((number, value))
    if not rows:
        raise ValueError(f"{path}: no records")
    return rows


def load_questions(path: Path) -> list[Question]:
    """Questions with a known category and verdict; optional fields get empty defaults."""
    questions: list[Question] = []
    for number, row in _read_jsonl(path):
        where = f"{path}:{number}"
        for key in ("id", "question", "category", "expected_verdict"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise ValueError(f"{where}: missing or empty {key!r}")
        if row["category"] not in CATEGORIES:
            raise ValueError(f"{where}: unknown category {row['category']!r}")
        if row["expected_verdict"] not in VERDICTS:
            raise ValueError(f"{where}: unknown expected_verdict {row['expected_verdict']!r}")
        answers, support = row.get("answers") or [], row.get("support") or []
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise ValueError(f"{where}: 'answers' must be a list of strings")
        if not isinstance(support, list) or not all(
            isinstance(s, dict) and all(isinstance(v, str) for v in s.values()) for s in support
        ):
            raise ValueError(f"{where}: 'support' must be a list of objects of strings")
        question: Question = {
            "id": row["id"],
            "question": row["question"],
            "category": row["category"],
            "expected_verdict": row["expected_verdict"],
            "answers": [a for a in answers if a.strip()],
            "reference_answer": str(row.get("reference_answer") or ""),
            "support": [
                {
                    "corpus": str(s.get("corpus", "")),
                    "doc": str(s.get("doc", "")),
                    "hint": str(s.get("hint", "")),
                }
                for s in support
            ],
        }
        if row.get("source"):
            question["source"] = str(row["source"])
        for key in ("expect", "reject"):
            if key in row:
                values = row[key]
                if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                    raise ValueError(f"{where}: {key!r} must be a list of texts")
                question[key] = [v for v in values if v.strip()]  # type: ignore[literal-required]
        if "conflict" in row:
            if not isinstance(row["conflict"], bool):
                raise ValueError(f"{where}: 'conflict' must be true or false")
            question["conflict"] = row["conflict"]
        questions.append(question)
    return questions


def load_pairs(path: Path) -> list[Pair]:
    """Labelled pairs, each passage read as crag reads a search result: the date that
    opens a snippet is its metadata, not part of its text (`split_date_stamps`)."""
    pairs: list[Pair] = []
    for number, row in _read_jsonl(path):
        if not all(isinstance(row.get(k), str) for k in ("question", "passage")):
            raise ValueError(f"{path}:{number}: missing question or passage")
        if not isinstance(row.get("relevant"), bool):
            raise ValueError(f"{path}:{number}: 'relevant' must be true or false")
        pairs.append(
            {
                "qid": str(row.get("qid") or row["question"]),
                "question": row["question"],
                "passage": split_date_stamps(row["passage"])[0],
                "relevant": row["relevant"],
            }
        )
    return pairs


def stratified(questions: Sequence[Question], limit: int | None) -> list[Question]:
    """The first `limit` questions taken round-robin across categories (file order within
    each), so that even a small run sees every category and so every verdict."""
    if limit is None or limit >= len(questions):
        return list(questions)
    groups: dict[str, list[Question]] = {}
    for q in questions:
        groups.setdefault(q["category"], []).append(q)
    picked: list[Question] = []
    for row in zip_longest(*groups.values()):
        picked.extend(q for q in row if q is not None)
    return picked[: max(0, limit)]
