"""The correction cascade in whole runs, on the sample library with the real local
embedder: a database as a fallback source, the route in the state and the CLI."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from crag.api import ask, summary
from crag.context import Context

QUESTION = "What is the monthly price of the Nebula Ultra plan?"


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("db") / "plans.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE plans (name TEXT, monthly_price_usd REAL, seats INTEGER)")
        conn.executemany(
            "INSERT INTO plans VALUES (?, ?, ?)",
            [("Nebula Basic", 9, 1), ("Nebula Ultra", 79, 25), ("Nebula Max", 249, 200)],
        )
    conn.close()
    return path


def test_a_structured_question_is_answered_from_the_database(
    sample_home: Path, plans: Path
) -> None:
    ctx = Context(home=sample_home, chat_model="extractive", sql_path=plans, external="none")
    result = summary(ask(QUESTION, context=ctx))
    assert result["route"] == "full"  # a price: structured, never the fast path
    assert result["verdict"] != "correct"  # the library knows no Nebula plans
    assert any(s.startswith("sql: ") and " result" in s for s in result["searched"])
    assert "79" in result["answer"]
    [citation] = [c for c in result["citations"] if c["source"] == "plans.sqlite"]
    assert citation["query"].startswith("WITH q(text) AS (SELECT 'what is the monthly price")
    assert sqlite3.connect(plans).execute("SELECT count(*) FROM plans").fetchone() == (3,)


def test_without_a_database_the_sql_source_is_left_out(sample_home: Path) -> None:
    ctx = Context(home=sample_home, chat_model="extractive", external="none")
    result = summary(ask(QUESTION, context=ctx))
    assert not any(s.startswith("sql") for s in result["searched"])
    assert not result["answered"]


def test_the_cli_shows_the_route_parts_and_sources_searched(sample_home: Path, plans: Path) -> None:
    cmd = [sys.executable, "-m", "crag.cli.main", "ask", QUESTION, "--home", str(sample_home)]
    cmd += ["--no-llm", "--external", "none", "--set", f"sql_path={plans}"]
    brief = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
    assert brief.splitlines()[-1].startswith("verdict: ") and "route:" not in brief
    cmd.append("-v")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
    assert out.startswith(brief.rstrip("\n"))  # the details come after the result
    assert "route: full" in out
    assert "searched: " in out and "sql: " in out
    assert "plans.sqlite (SQL: WITH q(text) AS (SELECT" in out
    data = json.loads(
        subprocess.run(
            [*cmd, "--json"], capture_output=True, text=True, timeout=300, check=True
        ).stdout
    )
    assert data["route"] == "full" and data["parts"] == []
