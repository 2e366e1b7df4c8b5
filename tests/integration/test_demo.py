"""`crag demo` (what `make demo` runs) on the bundled samples, without a model: every
question's verdict, and whether each answer states the fact the sample expects."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crag.cli.main import main

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_the_demo_reports_verdicts_and_answers(
    sample_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["demo", "--home", str(sample_home), "--no-llm", "--no-cache"])
    out = capsys.readouterr().out
    assert code == 0
    lines = (SAMPLES / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line) for line in lines if line.strip()]
    rows = out.split("== summary\n", 1)[1].splitlines()[1 : 1 + len(questions)]
    marks = [row.split()[2] for row in rows]
    assert set(marks) <= {"holds", "misses"} and len(marks) == len(questions)
    assert f"verdicts as expected: {len(questions)}/{len(questions)}" in out
    said = re.search(r"answers stating the expected fact .*: (\d+)/(\d+)", out)
    assert said and said.groups() == (str(marks.count("holds")), str(len(questions)))
    # the question nothing answers is declined, and that is the answer expected of it
    none = [i for i, q in enumerate(questions) if not q["answers"]]
    assert none and all(marks[i] == "holds" for i in none)
    # the port question's extractive answer quotes the installation guide's 7420
    assert marks[0] == "holds"


def test_an_expected_figure_is_not_found_inside_another() -> None:
    from crag.cli.demo import holds_answer

    item = {"answers": ["USD 8", "$8"]}
    assert holds_answer(item, {"answered": True, "answer": "It costs USD 8 a month."})
    assert not holds_answer(item, {"answered": True, "answer": "It costs USD 80 or $80."})
    assert not holds_answer(item, {"answered": False, "answer": "USD 8"})
