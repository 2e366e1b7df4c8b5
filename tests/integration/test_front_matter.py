"""Title blocks and boilerplate of the sample library never reach an answer."""

from __future__ import annotations

import json
from pathlib import Path

from crag import ask
from crag.context import Context
from crag.ingest.loaders import load_document
from crag.retrieval.library_index import library_index
from crag.text import sentence_key, split_sentences

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_no_title_block_or_notice_reaches_an_answer(sample_home: Path) -> None:
    ctx = Context(home=sample_home)
    index = library_index(ctx, "books")
    fronts = [load_document(f).front_matter for f in sorted(SAMPLES.glob("library/*.pdf"))]
    # "Halcyon Lattice Ltd." is also said in the text; a title or subtitle is not
    lines = {line for front in fronts for line in front.split("\n") if len(line.split()) > 4}
    assert all(fronts) and index.boilerplate  # each handbook's title block; their notice
    for row in (SAMPLES / "questions.jsonl").read_text().splitlines():
        question = json.loads(row)["question"]
        state = ask(question, home=sample_home, chat_model="extractive", grader="features")
        said = [s["text"] for s in state["kept_strips"]] + [state["answer"]]
        assert not any(line in text for line in lines for text in said), question
        keys = {sentence_key(s) for text in said for s in split_sentences(text)}
        assert not keys & index.boilerplate, question
