"""Bad input gets a clear error and never a silent wrong score."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from crag.context import Context
from crag.grading.features import FEATURES
from crag.grading.registry import make_grader
from crag.grading.trained import model_path
from crag.state import clean_question
from crag.text import printable


@pytest.mark.parametrize(
    ("knobs", "field"),
    [
        ({"strip_threshold": float("nan")}, "strip_threshold"),
        ({"strip_threshold": -1.0}, "strip_threshold"),
        ({"upper": float("inf")}, "upper"),
        ({"timeout_s": -5.0}, "timeout_s"),
        ({"timeout_s": float("nan")}, "timeout_s"),
        ({"max_question_chars": 0}, "max_question_chars"),
    ],
)
def test_out_of_range_and_non_finite_knobs_are_refused(
    knobs: dict[str, float], field: str, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=field):
        Context(home=tmp_path, **knobs)


def test_a_non_finite_environment_value_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CRAG_UPPER", "NaN")
    with pytest.raises(ValueError, match="upper"):
        Context(home=tmp_path)


@pytest.mark.parametrize(
    "model",
    [
        {"features": list(FEATURES), "weights": [1.0] * len(FEATURES), "bias": float("nan")},
        {"features": list(FEATURES), "weights": [1.0] * len(FEATURES), "bias": float("inf")},
        {"features": list(FEATURES), "weights": ["NaN"] * len(FEATURES), "bias": 0.0},
        [],
    ],
)
def test_a_trained_grader_that_cannot_give_probabilities_is_ignored(
    model: object, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = model_path(Context(home=tmp_path))
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 1, "model": model, "metadata": {}}))
    with caplog.at_level(logging.WARNING):
        assert make_grader(Context(home=tmp_path)).name == "features"
    assert "ignoring unusable trained grader" in caplog.text


@pytest.mark.parametrize("payload", ["[]", '{"model": []}', "null", '"text"'])
def test_a_trained_grader_file_of_the_wrong_shape_is_ignored(payload: str, tmp_path: Path) -> None:
    path = model_path(Context(home=tmp_path))
    path.parent.mkdir(parents=True)
    path.write_text(payload)
    assert make_grader(Context(home=tmp_path)).name == "features"


@pytest.mark.parametrize(
    ("question", "message"),
    [
        (None, "must be text, got NoneType"),
        (42, "must be text, got int"),
        ("   ", "empty"),
        ("caf\udce9?", "not valid UTF-8"),
        ("x" * 5000, "5000 characters long; the limit is 4000"),
    ],
)
def test_bad_questions_get_a_one_line_reason(question: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        clean_question(question, 4000)
    assert clean_question("  What is dropout?\n", 4000) == "What is dropout?"


def test_control_characters_never_reach_the_terminal() -> None:
    hostile = "Title\x1b[2J\x1b]0;pwned\x07 and\x08 \x9b31m text\tok\nnext"
    shown = printable(hostile)
    assert not any((ord(c) < 32 and c not in "\t\n") or 127 <= ord(c) < 160 for c in shown)
    assert shown == "Title\\x1b[2J\\x1b]0;pwned\\x07 and\\x08 \\x9b31m text\tok\nnext"


def test_a_grader_failure_on_web_results_is_recorded_not_fatal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import asyncio

    from langgraph.runtime import Runtime

    from crag.nodes import web_search as node

    class OneResult:
        name = "one"

        async def asearch(self, queries: list[str], k: int) -> list[dict[str, str]]:
            return [{"id": "w", "text": "a result", "origin": "external", "source": "s"}]

    class Broken:
        name = "broken"

        async def ascore(self, question: str, passages: list[str]) -> list[float]:
            raise RuntimeError("grader exploded")

    monkeypatch.setattr(node, "make_search", lambda ctx: OneResult())
    monkeypatch.setattr(node, "make_grader", lambda ctx: Broken())
    ctx = Context(home=tmp_path)
    update = asyncio.run(node.web_search({"question": "q?"}, runtime=Runtime(context=ctx)))
    assert update["web_docs"] == []
    assert (
        "grading the external results failed: RuntimeError: grader exploded" in update["web_error"]
    )


def test_a_file_name_never_breaks_a_progress_line() -> None:
    assert printable("evil\nname\r.pdf", one_line=True) == "evil\\x0aname\\x0d.pdf"
    assert printable("two\nlines") == "two\nlines"
