"""The conflict set end to end, offline: stale and fresh, forum and official sources.

`samples/conflicts` holds invented products whose sources disagree (see its README);
it is ingested once with the local embedder and asked without a language model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from crag import ask
from crag.cli.main import main
from crag.context import Context
from crag.ingest.indexer import ingest_path

ROOT = Path(__file__).resolve().parents[2]
CONFLICTS = ROOT / "samples" / "conflicts"


@pytest.fixture(scope="session")
def conflict_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("conflict-home")
    ctx = Context(home=home)
    for folder, collection in (("library", "books"), ("external", "external")):
        result = ingest_path(ctx, CONFLICTS / folder, collection=collection)
        assert result.exit_code == 0, result.to_dict()
    return home


def _ask(home: Path, question: str, **knobs: object) -> dict:
    return dict(ask(question, home=home, chat_model="extractive", grader="features", **knobs))


def test_the_newer_manual_wins_over_the_old_one(conflict_home: Path) -> None:
    state = _ask(conflict_home, "What is the default listener port of the Tessaro broker?")
    assert "5680" in state["answer"] and "5570" not in state["answer"]
    [conflict] = state["conflicts"]
    assert "newer" in conflict["reason"] and "sources disagree" in state["answer"]
    assert "tessaro_2_admin_guide.pdf" in state["answer"]  # the overruled source, named


def test_the_documentation_wins_over_the_forum(conflict_home: Path) -> None:
    state = _ask(conflict_home, "What is the default cache size of Vantry?")
    assert "256 MB" in state["answer"] and "512 MB" not in state["answer"]
    assert "more authoritative" in state["conflicts"][0]["reason"]
    # trusting the forum folder and not the docs folder reverses the decision
    reversed_trust = {"forum/": 1.0, "docs/": 0.0}
    question = "What is the default cache size of Vantry?"
    state = _ask(conflict_home, question, authority=reversed_trust)
    assert "512 MB" in state["answer"] and "256 MB" not in state["answer"]


def test_a_cached_answer_keeps_the_conflict_it_names(conflict_home: Path) -> None:
    question = "What is the default listener port of the Tessaro broker?"
    first = _ask(conflict_home, question, cache=True)
    again = _ask(conflict_home, question, cache=True)
    assert not first["cached"] and again["cached"]
    assert again["answer"] == first["answer"] and "sources disagree" in again["answer"]
    assert again["conflicts"] == first["conflicts"] != []


def test_sources_that_agree_are_no_conflict(conflict_home: Path) -> None:
    state = _ask(conflict_home, "How often do Tessaro cluster nodes send heartbeats?")
    assert "10 seconds" in state["answer"] and state["conflicts"] == []


def test_crag_eval_reports_conflicts_resolved_against_relevance_only(
    conflict_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "eval"
    argv = ["eval", str(CONFLICTS / "questions.jsonl"), "--home", str(conflict_home)]
    argv += ["--no-llm", "--systems", "crag,crag-relevance", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    assert "conflicts: resolved" in capsys.readouterr().out
    systems = json.loads((out / "metrics.json").read_text())["systems"]
    crag, plain = systems["crag"]["conflicts"], systems["crag-relevance"]["conflicts"]
    assert crag["n"] == plain["n"] >= 19 and crag["controls"] >= 5
    assert crag["resolved"] > plain["resolved"]
    assert crag["false_conflicts"] == 0.0 and plain["named"] == 0.0


def test_the_conflict_set_is_what_its_script_writes() -> None:
    script = ROOT / "scripts" / "make_conflicts.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
