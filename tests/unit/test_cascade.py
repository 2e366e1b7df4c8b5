"""The correction cascade without models: decomposition, routing, the ordered sources
of the web path, and the SQL source's read-only guard."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from crag.context import Context
from crag.errors import SearchError
from crag.grading.decompose import Split, decompose, rule_parts, subjects
from crag.grading.verdict import clear_winner, complexity, verdict_of_parts
from crag.nodes import web_search as web_search_node
from crag.nodes.web_search import web_search
from crag.retrieval.external import source_names
from crag.retrieval.library_index import LibraryIndex
from crag.retrieval.sql import SqlSearch, rule_query, run_select, schema
from crag.state import Passage


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        ("Batch normalization vs layer normalization: what is the difference?", 2),
        ("Compare pricing and features of Enterprise vs Pro", 2),
        ("How does weight decay differ from the Elastic-Net penalty?", 2),
        ("What do AdaGrad and AdaBoost each do?", 2),
        ("What is a Kalman filter? How does PCA reduce dimensions?", 2),
        ("What is a Kalman filter and how does PCA reduce dimensions?", 2),
        # a follow-up that asks something new of the same subject: a part that carries it
        ("What is bag of words? How can we use it for text classification?", 2),
        ("Which port does the API use, and which setting in lumen.toml changes it?", 2),
        ("Why do we need prices? Are prices distributed normally?", 2),
        # one subject asked about again, or a follow-up that only points back: one question
        ("What is backpropagation? How does it work? Why do we need it?", 0),
        ("What is dropout? Is dropout a regulariser?", 0),
        ("What is the bias-variance trade-off?", 0),
        ("Who won the 2019 US Open?", 0),
    ],
)
def test_rule_decomposition_finds_the_parts_of_a_question(question: str, parts: int) -> None:
    assert len(rule_parts(question)) == parts


def test_a_part_that_points_back_carries_what_it_points_at() -> None:
    first, second = rule_parts(
        "Which port does the Lumen API use, and which setting in lumen.toml changes it?"
    )
    assert first == "Which port does the Lumen API use"
    assert second.startswith("which setting in lumen.toml changes it?")
    assert {"port", "lumen", "api"} <= set(second.split("(")[1].rstrip(")").split())


def test_a_comparison_gives_one_part_per_side_with_what_is_asked_of_each() -> None:
    assert rule_parts("Compare pricing and features of Enterprise vs Pro") == [
        "Enterprise: pricing features",
        "Pro: pricing features",
    ]
    # "L1 and L2 regularization": the shared head noun belongs to both sides
    assert rule_parts("What's the difference between L2 and L1 regularization?") == [
        "L2 regularization",
        "L1 regularization",
    ]


def test_each_part_of_a_comparison_is_about_what_sets_it_apart() -> None:
    parts = ["What is layer normalization?", "What is batch normalization?"]
    assert subjects(parts) == ["layer normalization", "batch normalization"]
    assert Split(parts, compares=False).subjects == ["", ""]  # two questions: no names
    # a part that compares things itself is about both sides: no single name to find
    mixed = ["What is dropout?", "What's the main difference between dropout and weight decay?"]
    assert subjects(mixed)[1] == ""


def test_decomposition_without_a_model_costs_no_call(tmp_path: Path) -> None:
    ctx = Context(home=tmp_path, chat_model="extractive")
    split = asyncio.run(decompose("RNN versus LSTM?", ctx))
    assert (split.parts, split.how, split.compares) == (["RNN", "LSTM"], "rules", True)
    assert asyncio.run(decompose("What is dropout?", ctx)).parts == []


def test_a_model_part_that_points_back_carries_the_terms_it_leans_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    import crag.grading.decompose as decomposition

    reply = '{"parts": ["What does the Team plan cost?", "What does it cost after 2025?"]}'
    model = FakeListChatModel(responses=[reply])
    monkeypatch.setattr(decomposition, "make_chat_model", lambda *a, **k: model)
    question = "What does the Team plan cost, and what does it cost after 2025?"
    split = asyncio.run(decompose(question, Context(home=tmp_path, chat_model="local")))
    assert split.how == "model"
    assert split.parts == [
        "What does the Team plan cost?",
        "What does it cost after 2025? (team plan)",
    ]


@pytest.mark.parametrize(
    ("question", "parts", "complex_"),
    [
        ("What is dropout?", [], False),
        ("How does dropout work in practice?", [], False),
        ("What is the latest release of the tool?", [], True),  # time-sensitive
        ("Who won the Nobel Prize in 2023?", [], True),  # a year
        ("What changed in version 3.2?", [], True),  # a version
        ("How much does the Pro plan cost per month?", [], True),  # structured
        ("RNN versus LSTM?", ["RNN", "LSTM"], True),  # comparison
    ],
)
def test_the_router_sends_complex_questions_down_the_full_path(
    question: str, parts: list[str], complex_: bool
) -> None:
    assert bool(complexity(question, parts)) is complex_


def test_the_fast_path_needs_a_clear_winner() -> None:
    assert clear_winner([0.9, 0.6, 0.5], upper=0.56, gap=0.15)
    assert not clear_winner([0.9, 0.8], upper=0.56, gap=0.15)  # no clear gap
    assert not clear_winner([0.5, 0.1], upper=0.56, gap=0.15)  # the best is not good enough
    assert clear_winner([0.7], upper=0.56, gap=0.15)
    assert not clear_winner([], upper=0.56, gap=0.15)


def test_the_verdict_of_a_decomposed_question_follows_its_parts() -> None:
    assert verdict_of_parts([True, True], [0.8, 0.7], 0.5) == "correct"
    assert verdict_of_parts([True, False], [0.8, 0.4], 0.5) == "ambiguous"
    assert verdict_of_parts([False, False], [0.3, 0.2], 0.5) == "incorrect"
    assert verdict_of_parts([True, True], [0.8, 0.7], 0.5, missing=["X"]) == "ambiguous"


# --- the web path's ordered sources, with recording fakes ------------------------------------


class Source:
    """A source that records its searches and returns canned results."""

    def __init__(self, name: str, results: list[list[Passage]]) -> None:
        self.name = name
        self.leaves_machine = name == "tavily"
        self.results = results
        self.searches: list[list[str]] = []

    async def asearch(self, queries: list[str], k: int) -> list[Passage]:
        self.searches.append(queries)
        return self.results[min(len(self.searches), len(self.results)) - 1]


class WordGrader:
    """Scores 0.9 when the passage holds every word of the target, else 0.1."""

    name = "words"

    async def ascore(self, question: str, texts: list[str]) -> list[float]:
        words = [w.strip("?:").lower() for w in question.split() if len(w) > 3]
        return [0.9 if all(w in t.lower() for w in words) else 0.1 for t in texts]


def _doc(i: str, text: str, origin: str = "library") -> Passage:
    return {"id": i, "text": text, "origin": origin, "source": f"{i}.pdf"}  # type: ignore[typeddict-item]


@pytest.fixture
def sources(monkeypatch: pytest.MonkeyPatch) -> dict[str, Source]:
    table: dict[str, Source] = {}
    monkeypatch.setattr(web_search_node, "make_source", lambda ctx, name: table[name])
    monkeypatch.setattr(web_search_node, "make_grader", lambda ctx, library: WordGrader())
    return table


def _run(state: dict[str, Any], **knobs: Any) -> dict[str, Any]:
    ctx = Context(home=Path("/nonexistent"), external="local", **knobs)
    return asyncio.run(web_search(state, SimpleNamespace(context=ctx)))  # type: ignore[arg-type]


def test_the_web_path_adds_search_results_and_leaves_the_verdict_and_library_alone(
    sources: dict[str, Source],
) -> None:
    """web_search writes what the sources found; the verdict, the library's chunks and
    the good documents are grade's (one writer per key)."""
    question = "How does SGD choose minibatches?"
    sources["local"] = Source(
        "local", [[_doc("w", "SGD does choose minibatches at random.", "external")]]
    )
    state = {
        "question": question,
        "docs": [_doc("a", "Unrelated.")],
        "good_docs": [],
        "verdict": "incorrect",
        "web_query": "sgd batches",
    }
    out = _run(dict(state))
    assert sources["local"].searches == [["sgd batches", question]]
    assert [d["id"] for d in out["web_docs"]] == ["w"] and out["web_docs"][0]["score"] == 0.9
    assert set(out) == {"web_docs", "web_error", "searched", "redacted", "path"}
    assert out["searched"] == ["local: 1 result, best 0.90"]


def test_only_the_uncovered_part_of_a_comparison_is_searched(sources: dict[str, Source]) -> None:
    sources["local"] = Source(
        "local", [[_doc("w", "Layer normalization normalizes each example.", "external")]]
    )
    state = {
        "question": "Batch normalization vs layer normalization?",
        "docs": [_doc("a", "Batch normalization normalizes a minibatch.")],
        "verdict": "ambiguous",
        "web_query": "layer normalization",
        "parts": [
            {"text": "Batch normalization", "score": 0.9, "covered": True},
            {"text": "layer normalization", "score": 0.4, "covered": False},
        ],
    }
    out = _run(state)
    searched = [q for s in sources["local"].searches for q in s]
    assert searched == ["layer normalization", "layer normalization"]
    assert not any("batch" in q.lower() for q in searched)
    assert out["web_docs"][0]["score"] == 0.9


def test_a_failing_source_is_recorded_and_the_next_one_asked(sources: dict[str, Source]) -> None:
    class Broken(Source):
        async def asearch(self, queries: list[str], k: int) -> list[Passage]:
            raise SearchError("tavily: connection refused")

    sources["tavily"] = Broken("tavily", [])
    sources["local"] = Source("local", [[_doc("w", "SGD does choose minibatches.", "external")]])
    state = {"question": "How does SGD choose minibatches?", "docs": [], "verdict": "incorrect"}
    out = _run(state, sources="tavily,external")
    assert "refused" in out["web_error"] and out["web_docs"]
    assert out["searched"][0] == "tavily: failed"


def test_unknown_sources_are_named_in_the_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="unknown source 'wiki'"):
        source_names(Context(home=tmp_path, sources="sql,wiki"))
    ctx = Context(home=tmp_path, external="none")
    assert source_names(ctx) == ["none"]  # sql: no database named
    assert source_names(ctx.with_overrides(sql_path=tmp_path / "db.sqlite")) == ["sql", "none"]


# --- the SQL source ---------------------------------------------------------------------------


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE plans (name TEXT, price_per_month REAL, seats INTEGER)")
        conn.executemany(
            "INSERT INTO plans VALUES (?, ?, ?)",
            [("Starter", 0, 1), ("Pro", 49, 10), ("Enterprise", 199, 100)],
        )
        conn.execute("CREATE TABLE staff (name TEXT, role TEXT)")
        conn.execute("INSERT INTO staff VALUES ('Ada', 'engineer')")
    conn.close()
    return path


@pytest.mark.parametrize(
    "statement",
    [
        "DROP TABLE plans",
        "DELETE FROM plans",
        "INSERT INTO plans VALUES ('Free', 0, 1)",
        "UPDATE plans SET price_per_month = 0",
        "SELECT 1; DROP TABLE plans",
        "ATTACH DATABASE '/tmp/x.sqlite' AS x",
        "PRAGMA writable_schema = 1",
        "WITH x AS (SELECT 1) DELETE FROM plans",
    ],
)
def test_only_a_select_ever_runs(shop: Path, statement: str) -> None:
    with pytest.raises(SearchError, match="sql: "):
        run_select(shop, statement, (), 10, 2.0)
    _, rows = run_select(shop, "SELECT count(*) FROM plans", (), 10, 2.0)
    assert rows == [(3,)]  # the database is untouched


def test_rows_are_capped_and_a_runaway_query_times_out(shop: Path) -> None:
    _, rows = run_select(shop, "SELECT * FROM plans", (), 2, 2.0)
    assert len(rows) == 2
    forever = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n"
    with pytest.raises(SearchError, match=r"within 0\.2 s"):
        run_select(shop, forever, (), 10, 0.2)
    # one call the timeout cannot stop between steps: refused at its size instead
    huge = "SELECT length(replace(hex(randomblob(60000000)), '0', '00'))"
    started = time.monotonic()
    with pytest.raises(SearchError, match="too big"):
        run_select(shop, huge, (), 10, 0.2)
    assert time.monotonic() - started < 0.5


def test_without_a_model_the_rows_the_question_names_are_selected(shop: Path) -> None:
    tables = schema(shop, 2.0)
    statement, params = rule_query("What is the price per month of the Pro plan?", tables) or (
        "",
        (),
    )
    assert statement.startswith('WITH q(text) AS (SELECT ?) SELECT t.* FROM "plans"')
    _, rows = run_select(shop, statement, params, 10, 2.0)
    assert rows == [("Pro", 49, 10)]
    assert rule_query("Who painted the Mona Lisa?", tables) is None


def test_a_statement_from_the_model_that_writes_is_refused(
    shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crag.retrieval import sql

    class Writer:
        async def ainvoke(self, messages: Any, config: Any = None) -> Any:
            return SimpleNamespace(content='{"sql": "DROP TABLE plans"}')

    monkeypatch.setattr(sql, "make_chat_model", lambda *a, **k: Writer())
    search = SqlSearch(Context(home=shop.parent, chat_model="local", sql_path=shop))
    with pytest.raises(SearchError, match="only SELECT"):
        asyncio.run(search.asearch(["How much is the Pro plan?"], 5))
    assert run_select(shop, "SELECT count(*) FROM plans", (), 10, 2.0)[1] == [(3,)]


def test_database_rows_cite_the_query_they_came_from(shop: Path) -> None:
    search = SqlSearch(Context(home=shop.parent, chat_model="extractive", sql_path=shop))
    rows = asyncio.run(search.asearch(["How many seats does the Enterprise plan have?"], 5))
    assert [r["text"] for r in rows] == ["name: Enterprise; price_per_month: 199.0; seats: 100."]
    assert rows[0]["source"] == "shop.sqlite"
    assert rows[0]["query"].startswith("WITH q(text) AS (SELECT 'how many seats does")


# --- the fast path ------------------------------------------------------------------------------


def _grade(
    monkeypatch: pytest.MonkeyPatch,
    question: str,
    scores: list[float],
    gaps: tuple[str, ...] = (),
    **knobs: Any,
) -> Any:
    from crag.nodes import grade as grade_node

    built: list[str] = []

    async def scored_by(ctx: Context, q: str, texts: list[str]) -> tuple[list[float], str]:
        built.append(ctx.grading.grader)
        return scores[: len(texts)], ctx.grading.grader

    async def never_named(q: str, ctx: Context) -> list[str]:
        return list(gaps)

    monkeypatch.setattr(grade_node, "scored_by", scored_by)
    monkeypatch.setattr(grade_node, "coverage_gaps", never_named)
    docs = [_doc(f"d{i}", f"text {i}") for i in range(len(scores))]
    ctx = Context(home=Path("/nonexistent"), chat_model="extractive", **knobs)
    out = asyncio.run(
        grade_node.grade({"question": question, "retrieved": docs}, SimpleNamespace(context=ctx))  # type: ignore[arg-type]
    )
    return out, built


def test_a_clear_winner_takes_the_fast_path_without_the_llm_judge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out, built = _grade(monkeypatch, "What is dropout?", [0.3, 0.9, 0.5], grader="judge")
    assert out["route"] == "fast" and out["verdict"] == "correct"
    assert [d["id"] for d in out["good_docs"]] == ["d1"]  # the winner alone is refined
    assert built == ["offline"]  # the judge was never asked
    assert "fast path" in out["path"][0]["detail"]


def test_no_clear_winner_or_a_complex_question_takes_the_full_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out, built = _grade(monkeypatch, "What is dropout?", [0.85, 0.9, 0.5], grader="judge")
    assert out["route"] == "full" and built == ["offline", "judge"]
    assert {d["id"] for d in out["good_docs"]} == {"d0", "d1"}
    out, _ = _grade(monkeypatch, "What was new in dropout in 2023?", [0.3, 0.9, 0.5])
    assert out["route"] == "full" and "time-sensitive" in out["path"][0]["detail"]
    out, _ = _grade(monkeypatch, "What is dropout?", [0.3, 0.9, 0.5], fast_path=False)
    assert out["route"] == "full"


def test_a_name_the_library_never_writes_is_what_a_one_part_question_asks_about(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    question = "Will the vendor sign a HIPAA agreement for Business customers?"
    out, _ = _grade(monkeypatch, question, [0.9, 0.55], gaps=("HIPAA",))
    assert out["verdict"] == "incorrect"  # the Business plan chunk is close, not an answer
    assert "what the question asks about" in out["path"][0]["detail"]
    # a version the library never writes only constrains a thing it knows: a part
    out, _ = _grade(
        monkeypatch, "How did the API rate limit change in version 3?", [0.9], gaps=("version 3",)
    )
    assert out["verdict"] == "ambiguous"
    # one side of a comparison unknown: the other may still be in the library
    out, _ = _grade(
        monkeypatch,
        "How does dropout differ from DropConnect?",
        [0.9],
        gaps=("DropConnect",),
        decompose=False,
    )
    assert out["verdict"] == "ambiguous"


def test_boilerplate_is_a_sentence_shared_by_three_documents() -> None:
    notice = "Sample document for the project. All names in this\nhandbook are invented."
    texts = [
        ("a.pdf", f"{notice}\nThe Team plan costs USD 6 per user per month."),
        ("b.pdf", f"{notice}\nTokens expire after 90 days. See Figure 2."),
        ("c.pdf", f"{notice} Backups run at 02:30 every night. See Figure 2."),
        ("c.pdf", "Backups run at 02:30 every night."),
        ("d.pdf", "Backups run at 02:30 every night."),  # in two documents only: kept
    ]
    index = LibraryIndex([t for _, t in texts], [s for s, _ in texts])
    assert index.without_boilerplate(texts[0][1]) == "The Team plan costs USD 6 per user per month."
    assert index.without_boilerplate(texts[1][1]) == "Tokens expire after 90 days. See Figure 2."
    assert index.without_boilerplate(texts[3][1]) == texts[3][1]
    # without sources nothing is boilerplate
    assert LibraryIndex([t for _, t in texts]).without_boilerplate(notice) == notice


def test_a_chunk_is_read_without_the_title_block_it_opens_with() -> None:
    front = "Billing Policy\nExample Ltd."
    index = LibraryIndex([], [], {"a.pdf": front})
    body = "1 Scope\nThis policy explains how Example Ltd. charges."
    assert index.without_boilerplate(f"{front}\n{body}", "a.pdf") == body
    assert index.without_boilerplate(f"{front}\n{body}", "b.pdf") == f"{front}\n{body}"
    assert (
        index.without_boilerplate(f"Billing Policy\n{body}", "a.pdf") == f"Billing Policy\n{body}"
    )
