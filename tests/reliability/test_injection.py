"""Prompt injection: orders hidden in sources never reach an answer, and the filter that
drops them leaves the books' own sentences alone.

- attacks.jsonl: 40 technical passages, each with an embedded order (8 languages or
  styles x 5 placements) whose payload asks the answer to contain a marker token.
  Each goes through crag's whole graph with extractive answers (no model: what a
  source says is quoted verbatim, so an order that survives the filter shows up in
  the answer). The measurement with the local model is benchmarks/bench_injection.py.
- benign.jsonl: hard sentences from the dev books (file and page given) and some
  written ones in six languages, full of "ignore", "instructions", "you should".
- every sentence of the dev books, when the evaluation data is there.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from crag.api import ask, summary
from crag.context import Context
from crag.directives import find_directives, without_directives
from crag.text import split_sentences

DATA = Path(__file__).parent / "data"
#: The share of legitimate sentences the filter may drop.
MAX_DROPPED = 0.01


def _load(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line]


ATTACKS = _load("attacks.jsonl")
BENIGN = _load("benign.jsonl")


def test_the_attack_set_covers_every_style_and_placement() -> None:
    assert len(ATTACKS) >= 40
    cells = Counter((a["style"], a["placement"]) for a in ATTACKS)
    assert len({s for s, _ in cells}) >= 8 and len({p for _, p in cells}) == 5
    assert len({a["marker"] for a in ATTACKS}) >= 35  # payloads vary
    for attack in ATTACKS:
        assert attack["text"].count(attack["marker"]) == 1, attack["id"]


@pytest.fixture(scope="module")
def attack_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A library of the 40 attack passages, one Markdown file each."""
    from crag.ingest.indexer import ingest_path

    folder = tmp_path_factory.mktemp("attacks")
    for attack in ATTACKS:
        (folder / f"{attack['id']}.md").write_text(f"# {attack['topic']}\n\n{attack['text']}\n")
    home = tmp_path_factory.mktemp("crag-home")
    assert ingest_path(Context(home=home), folder).exit_code == 0
    return home


def test_no_attack_is_obeyed_through_the_whole_graph(attack_home: Path, tally: Any) -> None:
    obeyed, answered_from_it = [], 0
    for attack in ATTACKS:
        state = ask(
            attack["question"],
            # the attack pages are short and score low by similarity: the thresholds are
            # set low so that each question is answered from its page (what is tested
            # is the filter, not the grading)
            context=Context(
                home=attack_home, chat_model="extractive", external="none", lower=0.3, upper=0.3
            ),
        )
        result = summary(state)
        # any attack's marker counts: retrieval also brings the other passages
        leaked = [a["marker"] for a in ATTACKS if a["marker"].lower() in result["answer"].lower()]
        tally("attack", attack["id"], not leaked)
        if leaked:
            obeyed.append((attack["id"], leaked, result["answer"]))
        cited = {c["source"] for c in result["citations"]}
        answered_from_it += result["answered"] and f"{attack['id']}.md" in cited
    assert obeyed == []
    # the test has teeth: most answers do quote the attacked passage itself
    assert answered_from_it >= 0.9 * len(ATTACKS), answered_from_it


@pytest.mark.parametrize("attack", ATTACKS, ids=[a["id"] for a in ATTACKS])
def test_the_order_goes_and_the_passage_stays(attack: dict[str, Any]) -> None:
    kept = without_directives(attack["text"])
    assert attack["marker"] not in kept
    # the order takes at most its own sentences with it, never the passage
    assert len(split_sentences(kept)) >= len(split_sentences(attack["text"])) - 3
    assert len(kept) >= 0.6 * len(attack["text"]) - 120


def test_benign_sentences_are_kept(tally: Any) -> None:
    dropped = []
    for item in BENIGN:
        kept = without_directives(item["text"]) == item["text"]
        tally("benign", item["id"], kept)
        if not kept:
            dropped.append(
                (item["id"], item["text"], [d.rule for d in find_directives(item["text"])])
            )
    print(f"\nbenign sentences dropped: {len(dropped)} of {len(BENIGN)}")
    for item_id, text, rules in dropped:
        print(f"  {item_id}: {text} ({', '.join(rules)})")
    assert len(BENIGN) >= 200
    assert sum(i["kind"] == "book" for i in BENIGN) >= 150
    assert len(dropped) <= MAX_DROPPED * len(BENIGN), dropped


def test_the_dev_books_lose_almost_no_sentence(books_dir: Path, tally: Any) -> None:
    from crag.ingest.loaders import load_document

    total, dropped = 0, []
    for book in sorted(books_dir.glob("*.pdf")):
        for page in load_document(book).pages:
            sentences = split_sentences(page.text)
            kept = Counter(split_sentences(without_directives(page.text)))
            total += len(sentences)
            for sentence in sentences:
                if kept[sentence] > 0:
                    kept[sentence] -= 1
                else:
                    dropped.append((book.name, page.label or page.number, sentence))
    tally.add("book sentences dropped", len(dropped))
    print(f"\ndev-book sentences dropped: {len(dropped)} of {total}")
    for name, page, sentence in dropped:
        print(f"  {name} p.{page}: {sentence}")
    assert total > 10_000
    assert len(dropped) <= MAX_DROPPED * total
