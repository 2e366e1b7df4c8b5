"""`crag tune` and `crag eval` replay the grade node's verdict at other thresholds from
the grades of one run: the replay must be the verdict the node gives when run at
those thresholds (fast path, parts, gaps and all)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from crag import Context
from crag.grading.verdict import decide
from crag.nodes.grade import fast_gap
from crag.state import InputState, State
from crag_lab.partial import steps

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
QUESTIONS = [
    json.loads(line)["question"]
    for name in ("questions.jsonl", "factoids.jsonl")
    for line in (SAMPLES / name).read_text().splitlines()[:8]
]
# (lower, upper): from lenient to strict, the defaults among them
THRESHOLDS = [(0.2, 0.3), (0.4, 0.6), (0.55, 0.56), (0.5, 0.8), (0.7, 0.95)]


def graded(question: str, ctx: Context) -> State:
    run = steps("split", "retrieve", "grade")
    return asyncio.run(run.ainvoke(InputState(question=question), context=ctx))  # type: ignore[return-value]


@pytest.mark.parametrize("question", QUESTIONS)
def test_the_replayed_verdict_is_the_one_the_node_gives_at_those_thresholds(
    sample_home: Path, question: str
) -> None:
    base = Context(home=sample_home, chat_model="extractive", cache=False)
    grades = graded(question, base)["grades"]
    for lower, upper in THRESHOLDS:
        ctx = base.with_overrides(lower=lower, upper=upper)
        state = graded(question, ctx)
        replay = decide(grades, upper, lower, fast_gap(ctx))
        assert (replay.verdict, replay.fast) == (state["verdict"], state["route"] == "fast")
        good = [state["docs"][i]["id"] for i in replay.good]
        assert good == [d["id"] for d in state["good_docs"]], (lower, upper)
        assert replay.missing == state["missing_terms"]
