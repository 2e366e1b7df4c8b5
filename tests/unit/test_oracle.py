"""The lab's perfect reader: a passage scores 1 exactly when it holds the labelled evidence."""

from __future__ import annotations

import asyncio
from pathlib import Path

from crag.context import Context
from crag.grading.registry import make_grader, make_strip_grader
from crag_lab.dataset import Question
from crag_lab.oracle import CURRENT
from crag_lab.runner import parse_systems, system_context


def question(category: str) -> Question:
    return {
        "id": "q1",
        "question": "Which port does Lumen listen on?",
        "category": category,  # type: ignore[typeddict-item]
        "expected_verdict": "correct",
        "answers": ["7420"],
        "reference_answer": "",
        "support": [{"corpus": "books", "doc": "guide.pdf", "hint": "set by listen_port"}],
    }


PASSAGES = [
    "Lumen listens on port 7420.",
    "The port is set   by LISTEN_PORT in the server section.",  # the hint, spacing aside
    "Lumen keeps thirty days of logs.",
]


def scores(ctx: Context, labelled: Question | None, strips: bool = False) -> list[float]:
    async def go() -> list[float]:
        CURRENT.set(labelled)
        grader = make_strip_grader(ctx) if strips else make_grader(ctx, library=True)
        return await grader.ascore("a part of the question, reworded", PASSAGES)

    return asyncio.run(go())


def test_the_oracle_scores_the_labelled_evidence_and_nothing_else(tmp_path: Path) -> None:
    assert parse_systems("crag,oracle") == ["crag", "oracle"]
    ctx = system_context("oracle", Context(home=tmp_path))
    assert ctx.grading.grader == "oracle"
    assert scores(ctx, question("internal")) == [1.0, 1.0, 0.0]
    assert scores(ctx, question("partial"), strips=True) == [1.0, 1.0, 0.0]
    # nothing answers an unanswerable question, whatever its labels name
    assert scores(ctx, question("none")) == [0.0, 0.0, 0.0]
    assert scores(ctx, None) == [0.0, 0.0, 0.0]
