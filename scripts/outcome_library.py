"""A labelled library built from the generated questions, to fit crag's confidence on
(docs/evaluation.md, "A third library from the generated questions": measured, not kept).

    python scripts/outcome_library.py build OUT [--by corpus|document]
    crag eval gen=OUT --systems crag --no-llm --ingest --out RUN
    python scripts/outcome_library.py measure HELD_OUT_RUN RUN OUT

The dev libraries hold 121 and 100 questions: too few to fit a calibrated model on one
and read its error on the other. The generated questions (`train/reader`) know their
answers by construction, so a library and its question set can be assembled from them:
documents of the training corpora are dealt into the library (`books/`), the external
corpus (`external/`) or nowhere (`--by document`: by a seeded hash of each document;
`--by corpus`: whole corpora), and each question is labelled by where its document
went. A question whose document went nowhere is unanswerable, unless its answering
sentence is found in a kept document (then it is dropped). `measure` fits the
confidence model on the generated library's runs and reads it on each dev library of
a held-out `crag eval` run, beside the model fitted on the other dev library.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crag.text import normalize
from crag_lab.corpora import CORPORA
from crag_lab.libraries import QUESTIONS

#: Where a document goes, by the share of the corpus' documents: library, external, none.
SHARES = (0.5, 0.25, 0.25)
#: Questions per category (partial: a library question and an external one, asked together).
COUNTS = {"internal": 150, "external": 100, "none": 100, "partial": 50}
EXPECTED = {"internal": "correct", "external": "incorrect", "none": "incorrect"}
EXPECTED["partial"] = "ambiguous"
#: A document gives at most this many questions, so one long manual does not dominate.
PER_DOCUMENT = 2
#: An answer is matched by itself only when it is this long; a shorter one ("true") is
#: found anywhere, so its sentence is the evidence.
ANSWER_CHARS = 12


@dataclass(frozen=True)
class Placed:
    """A training document and where the set puts it."""

    corpus: str
    path: str
    role: str  # "books", "external" or "none"

    @property
    def file_name(self) -> str:
        stem = re.sub(r"[^A-Za-z0-9]+", "_", self.path.strip("/")).strip("_")[-80:]
        return f"{self.corpus}__{stem}.txt"


def role_of(corpus: str, path: str, seed: int) -> str:
    """A document's place, by a seeded hash of its name: stable as the data grows."""
    digest = hashlib.sha256(f"{seed}:{corpus}:{path}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    return "books" if u < SHARES[0] else "external" if u < SHARES[0] + SHARES[1] else "none"


def squashed(text: str) -> str:
    return " ".join(normalize(text).lower().split())


def usable(row: Mapping[str, Any]) -> bool:
    """A question worth asking: it does not give its answer away and names something."""
    question, answer = squashed(row["question"]), squashed(row["answer"])
    words = re.findall(r"[a-z][a-z0-9_]{2,}", question)
    return bool(answer) and answer not in question and len(words) >= 3


def question_entry(row: Mapping[str, Any], placed: Placed, qid: str) -> dict[str, Any]:
    answer = str(row["answer"]).strip().rstrip(".")
    corpus = "books" if placed.role == "books" else "external"
    return {
        "id": qid,
        "question": row["question"],
        "category": "internal" if placed.role == "books" else placed.role,
        "expected_verdict": EXPECTED["internal" if placed.role == "books" else placed.role],
        "answers": [answer] if len(answer) >= ANSWER_CHARS else [],
        "support": []
        if placed.role == "none"
        else [{"corpus": corpus, "doc": placed.file_name, "hint": row["sentence"]}],
        "origin": f"{row['chunk_id']} (generated: {row['settings'].get('model', '')})",
        "notes": "",
    }


def partial_entry(
    inside: Mapping[str, Any], outside: Mapping[str, Any], qid: str
) -> dict[str, Any]:
    """Two questions asked as one: half is in the library, half only outside."""
    return {
        "id": qid,
        "question": f"{inside['question'].strip()} {outside['question'].strip()}",
        "category": "partial",
        "expected_verdict": EXPECTED["partial"],
        "answers": [],
        "support": inside["support"] + outside["support"],
        "origin": f"{inside['origin']} + {outside['origin']}",
        "notes": "",
    }


def build(
    rows: Sequence[Mapping[str, Any]],
    out: Path,
    *,
    counts: Mapping[str, int] = COUNTS,
    seed: int = 0,
    text_of: Any = None,
    roles: Mapping[str, str] | None = None,
) -> dict[str, int]:
    """Write `out/books`, `out/external` and `out/questions.jsonl` from generated
    question rows. `text_of(corpus, path)` reads a document (the corpora's reader by
    default). Returns how many questions of each category were written."""
    read = text_of or (lambda corpus, path: CORPORA[corpus].text(Path(path)))
    rng = random.Random(seed)
    order = list(rows)
    rng.shuffle(order)
    wanted = {
        "books": counts["internal"] + counts["partial"],
        "external": counts["external"] + counts["partial"],
        "none": counts["none"] * 2,  # some are dropped below: their answer is kept elsewhere
    }
    picked: dict[str, list[tuple[Mapping[str, Any], Placed]]] = defaultdict(list)
    per_doc: dict[tuple[str, str], int] = defaultdict(int)
    texts: dict[Placed, str | None] = {}
    for row in order:
        key = (row["corpus"], row["document"])
        role = roles.get(key[0], "none") if roles is not None else role_of(*key, seed)
        placed = Placed(*key, role)
        if len(picked[placed.role]) >= wanted[placed.role] or per_doc[key] >= PER_DOCUMENT:
            continue
        if not usable(row):
            continue
        if placed.role != "none" and placed not in texts:
            try:
                texts[placed] = read(*key).strip() or None
            except OSError:  # a package not installed: its documents are left out
                texts[placed] = None
        if texts.get(placed, "") is None:
            continue
        picked[placed.role].append((row, placed))
        per_doc[key] += 1
    kept_text = []
    for placed, text in sorted(texts.items(), key=lambda item: item[0].file_name):
        if text is None:
            continue
        folder = out / placed.role
        folder.mkdir(parents=True, exist_ok=True)
        (folder / placed.file_name).write_text(text + "\n", encoding="utf-8")
        kept_text.append(squashed(text))
    everything = "\n".join(kept_text)
    entries: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for role, category in (("books", "internal"), ("external", "external"), ("none", "none")):
        for i, (row, placed) in enumerate(picked[role]):
            if role == "none" and squashed(row["sentence"]) in everything:
                continue
            entries[category].append(question_entry(row, placed, f"gen-{category}-{i:03d}"))
    inside = entries["internal"][counts["internal"] :]
    outside = entries["external"][counts["external"] :]
    written = {
        "internal": entries["internal"][: counts["internal"]],
        "external": entries["external"][: counts["external"]],
        "none": entries["none"][: counts["none"]],
        "partial": [
            partial_entry(a, b, f"gen-partial-{i:03d}")
            for i, (a, b) in enumerate(zip(inside, outside, strict=False))
        ][: counts["partial"]],
    }
    with (out / QUESTIONS).open("w", encoding="utf-8") as f:
        for category in ("internal", "external", "partial", "none"):
            for entry in written[category]:
                f.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return {category: len(items) for category, items in written.items()}


#: `--by corpus`: the corpora of the library and of the external corpus; the rest go nowhere.
BY_CORPUS = {"git": "books", "cmake": "books", "vim": "books", "bash": "books"}
BY_CORPUS |= {"rust": "external", "perl": "external", "nginx": "external"}


def measure(held_out: Path, generated: Path, library: Path) -> None:
    """ECE and gap on each dev library of the model fitted on the other dev library, on
    the generated library, and on both."""
    import numpy as np

    from crag_lab import confidence
    from crag_lab.dataset import load_questions
    from crag_lab.metrics import calibration

    def outcomes(run: Path, questions: Path) -> confidence.Outcomes:
        by_id = {r["id"]: r for r in map(json.loads, (run / "records.jsonl").open())}
        qs = [q for q in load_questions(questions) if q["id"] in by_id]
        return confidence.outcomes(qs, [by_id[q["id"]] for q in qs])

    dev = {n: outcomes(held_out / n, Path("eval") / n / QUESTIONS) for n in ("d2l", "pydocs")}
    gen = outcomes(generated / "gen", library / QUESTIONS)
    rates = ", ".join(f"{n} {y.mean():.3f}" for n, (_, y) in [*dev.items(), ("generated", gen)])
    print(f"share right: {rates}")
    for name, (x, y) in dev.items():
        other = [s for n, s in dev.items() if n != name]
        fits = (("the other dev library", other), ("generated", [gen]), ("both", [*other, gen]))
        for label, sets in fits:
            p = confidence.fit(sets).predict(x)
            right = y > 0.5
            ece = calibration(p.tolist(), right.tolist(), 10)["ece"]
            gap = float(np.mean(p[right]) - np.mean(p[~right]))
            print(f"{name}, fitted on {label}: ECE {ece:.3f}, gap {gap:.3f}")


def main() -> None:
    import argparse

    from crag_lab.construct import read_rows

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("build")
    make.add_argument("out", type=Path)
    make.add_argument("--by", choices=("corpus", "document"), default="corpus")
    make.add_argument("--data", type=Path, default=Path("train/reader/questions.jsonl.gz"))
    fit = sub.add_parser("measure")
    for name in ("held_out", "generated", "library"):
        fit.add_argument(name, type=Path)
    args = parser.parse_args()
    if args.command == "measure":
        measure(args.held_out, args.generated, args.library)
        return
    rows, _ = read_rows(args.data)
    args.out.mkdir(parents=True, exist_ok=True)
    print(build(rows, args.out, roles=BY_CORPUS if args.by == "corpus" else None))


if __name__ == "__main__":
    main()
