"""The demo's first question: every citation points to the page that holds the sentence
it supports, with the extractive answer and with the local model writing it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crag.api import ask, summary
from crag.context import Context
from crag.ingest.loaders import load_document
from crag.text import stems

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
MARK = re.compile(r"\[(\d+)\]")


def first_demo_question() -> str:
    line = (SAMPLES / "questions.jsonl").read_text(encoding="utf-8").splitlines()[0]
    return str(json.loads(line)["question"])


def library_pages() -> dict[tuple[str, str], set[str]]:
    """Each page of the sample library, by (file, page as cited), as its word stems."""
    pages = {}
    for pdf in sorted((SAMPLES / "library").glob("*.pdf")):
        for page in load_document(pdf).pages:
            pages[(pdf.name, page.label or str(page.number))] = stems(page.text)
    return pages


def cited_claims(answer: str) -> list[tuple[str, int]]:
    """Each stretch of the answer with the citation that closes it."""
    claims, start = [], 0
    for mark in MARK.finditer(answer):
        text = answer[start : mark.start()].strip()
        if stems(text):
            claims.append((text, int(mark.group(1))))
        start = mark.end()
    return claims


@pytest.mark.parametrize(
    "chat_model", ["extractive", pytest.param("local", marks=pytest.mark.slow)]
)
def test_every_citation_points_to_the_page_that_states_its_claim(
    sample_home: Path, chat_model: str
) -> None:
    result = summary(
        ask(
            first_demo_question(),
            context=Context(home=sample_home, chat_model=chat_model, cache=False),
        )
    )
    assert result["answered"], result["answer"]
    assert "7420" in result["answer"]
    cited = {c["n"]: c for c in result["citations"]}
    pages = library_pages()
    claims = cited_claims(result["answer"])
    assert claims, result["answer"]
    for text, n in claims:
        said = stems(text)
        overlap = {key: len(said & page) / len(said) for key, page in pages.items()}
        best = max(overlap.values())
        where = (cited[n]["source"], str(cited[n].get("page")))
        assert overlap[where] == best, (text, where, sorted(overlap.items(), key=lambda kv: -kv[1]))
        assert best >= 0.5, (text, overlap)
    port = next(n for text, n in claims if "7420" in text)
    assert (cited[port]["source"], str(cited[port]["page"])) == (
        "01_lumen_installation_guide.pdf",
        "2",
    )
