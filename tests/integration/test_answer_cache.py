"""The answer cache: confident answers come back for the same question (in other words),
per tenant, until the tenant's library changes; nothing unsure is ever stored."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from tenants import ACME, GLOBEX, write_tenant

from crag import cache
from crag.api import ask, summary
from crag.cache import CACHE_FILE, entries, worth_keeping
from crag.cli.ask import render
from crag.cli.main import main
from crag.context import Context
from crag.grading.registry import trained_path
from crag.ingest.indexer import ingest_path
from crag.models.embeddings import embeddings_for

ANNUAL = "How long is the refund window for annual plans?"
PORT = "Which TCP port does the server listen on by default?"


def _ctx(home: Path, tenant: str = "acme", **knobs: Any) -> Context:
    return Context(
        home=home,
        tenant=tenant,
        chat_model="extractive",
        grader="features",
        external="none",
        cache=True,
        **knobs,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    for tenant in (ACME, GLOBEX):
        library, _ = write_tenant(tmp_path / "docs", tenant)
        assert ingest_path(Context(home=home, tenant=tenant.name), library).exit_code == 0
    return home


def _answer(state: Any) -> tuple[Any, ...]:
    return (state["answer"], state["citations"], state["verdict"], state["support"])


def test_a_paraphrase_is_answered_from_the_cache(home: Path) -> None:
    ctx = _ctx(home)
    first = ask(ANNUAL, context=ctx)
    assert first["verdict"] == "correct" and not first["cached"] and "45 days" in first["answer"]
    assert first["path"][-1]["detail"].endswith("; cached")
    for again in (
        ANNUAL,
        "For annual plans, how long is the refund window?",
        "How long is the refund window for yearly plans?",  # a synonym swapped in
    ):
        state = ask(again, context=ctx)
        assert state["cached"] and _answer(state) == _answer(first), again
        # a hit ends the run at the lookup: nothing is retrieved, graded or drafted
        assert [s["node"] for s in state["path"]] == ["condense", "cache_lookup"]
        assert "cached answer (similarity" in state["path"][1]["detail"]
        result = summary(state)
        assert result["cached"] is True and result["tenant"] == "acme"
        assert result["path"] == ["condense", "cache_lookup"]
        assert result["documents"] == [] and result["verdict"] == "correct"
        # the answer keeps the confidence it was cached for, and says where it is from
        assert result["confidence"] == first["confidence"] > 0
        shown = render(result, details=True)
        assert "an answer cached by an earlier run" in shown and "retrieved:" not in shown


def test_a_different_question_is_not(home: Path) -> None:
    ctx = _ctx(home)
    ask(ANNUAL, context=ctx)
    for other in (
        "How long is the refund window for monthly plans?",  # close in embedding: 0.93
        "How long is the refund window for annual plans in 2023?",  # a year added
        "How long is the refund window?",  # a word dropped widens it
        PORT,
    ):
        state = ask(other, context=ctx)
        assert not state["cached"], other
        assert [s["node"] for s in state["path"][:3]] == ["condense", "cache_lookup", "split"]


def test_declined_and_unsure_answers_are_never_stored(home: Path) -> None:
    ctx = _ctx(home)
    declined = ask("How fast does support answer a ticket?", context=ctx)  # not in acme's
    assert declined["answered"] is False and entries(ctx) == 0
    sure = {"verdict": "correct", "answered": True, "support": "supported", "unsupported": []}
    assert worth_keeping(sure, ctx)
    for unsure in (
        {"verdict": "ambiguous"},  # the web path
        {"verdict": "incorrect"},
        {"answered": False, "support": "none"},  # a refusal
        {"support": "partial", "unsupported": ["2023"]},  # a near miss, said as such
        {"support": "partial"},  # sentences dropped by the grounding check
        {"confidence": 0.4},  # below cache_min_confidence
    ):
        assert not worth_keeping({**sure, **unsure}, ctx.with_overrides(cache_min_confidence=0.5))
    # the confidence hook: a float is checked, anything else is not a confidence
    assert worth_keeping({**sure, "confidence": 0.6}, ctx.with_overrides(cache_min_confidence=0.5))
    assert worth_keeping({**sure, "confidence": None}, ctx.with_overrides(cache_min_confidence=1))


def test_an_ingest_of_the_tenants_library_invalidates_its_entries(
    home: Path, tmp_path: Path
) -> None:
    acme, globex = _ctx(home), _ctx(home, "globex")
    ask(ANNUAL, context=acme)
    ask(ANNUAL, context=globex)
    assert ask(ANNUAL, context=acme)["cached"] and ask(ANNUAL, context=globex)["cached"]
    # globex changes its library: its entries are stale, acme's are not
    (tmp_path / "docs" / "globex" / "library" / "notes.md").write_text(
        "# Quillon notes\n\nQuillon notes for the Quillon team.\n", encoding="utf-8"
    )
    summary_ = ingest_path(Context(home=home, tenant="globex"), tmp_path / "docs/globex/library")
    assert summary_.files_ok == 1
    assert ask(ANNUAL, context=acme)["cached"]
    state = ask(ANNUAL, context=globex)
    assert not state["cached"] and "21 days" in state["answer"]
    assert ask(ANNUAL, context=globex)["cached"]  # stored again, for the new version
    # an ingest that changes nothing keeps the entries
    ingest_path(Context(home=home, tenant="globex"), tmp_path / "docs/globex/library")
    assert ask(ANNUAL, context=globex)["cached"]


def test_the_cache_is_per_tenant(home: Path) -> None:
    first = ask(ANNUAL, context=_ctx(home))
    theirs = ask(ANNUAL, context=_ctx(home, "globex"))
    assert not theirs["cached"] and "21 days" in theirs["answer"]
    assert "45 days" in first["answer"] and "Orbix" not in json.dumps(summary(theirs))
    with sqlite3.connect(home / CACHE_FILE) as db:
        rows = db.execute("SELECT tenant, result FROM answers").fetchall()
    assert sorted(t for t, _ in rows) == ["acme", "globex"]
    assert all(("Orbix" in r) == (t == "acme") for t, r in rows)


def test_settings_that_change_answers_do_not_share_entries(home: Path) -> None:
    ask(ANNUAL, context=_ctx(home))
    assert not ask(ANNUAL, context=_ctx(home, k=3))["cached"]
    assert not ask(ANNUAL, context=_ctx(home, strip_threshold=0.3))["cached"]
    assert not ask(ANNUAL, context=_ctx(home, candidates=8))["cached"]
    assert not ask(ANNUAL, context=_ctx(home, strip_weight=0.0))["cached"]
    assert not ask(ANNUAL, context=_ctx(home, fast_path=False))["cached"]
    assert not ask(ANNUAL, context=_ctx(home, weight_recency=0.5))["cached"]
    assert not ask(ANNUAL, context=_ctx(home, dedup_threshold=0.5))["cached"]
    # the external source is not among them: a `correct` verdict never searches
    assert ask(ANNUAL, context=_ctx(home).with_overrides(external="local"))["cached"]


def test_an_answer_cached_by_an_older_crag_is_not_served(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = _ctx(home)
    ask(ANNUAL, context=ctx)
    assert ask(ANNUAL, context=ctx)["cached"]
    # a crag whose answers read otherwise (new marks, pages, kept keys) raises the format
    monkeypatch.setattr("crag.cache.RESULT_FORMAT", cache.RESULT_FORMAT + 1)
    state = ask(ANNUAL, context=ctx)
    assert not state["cached"] and state["verdict"] == "correct"
    assert ask(ANNUAL, context=ctx)["cached"]  # and the fresh answer is cached anew


def test_the_size_bound_evicts_the_least_recently_used(home: Path) -> None:
    ctx = _ctx(home, cache_size=2)
    questions = [ANNUAL, PORT, "Which setting changes the port of the server?"]
    ask(questions[0], context=ctx)
    ask(questions[1], context=ctx)
    assert ask(questions[0], context=ctx)["cached"]  # used again: now the most recent
    ask(questions[2], context=ctx)
    assert entries(ctx) == 2
    assert ask(questions[0], context=ctx)["cached"]
    assert not ask(questions[1], context=ctx)["cached"]  # evicted


def test_the_similarity_threshold_is_a_knob(home: Path) -> None:
    ask(ANNUAL, context=_ctx(home))
    paraphrase = "For annual plans, how long is the refund window?"
    strict = _ctx(home, cache_threshold=0.995)
    assert not ask(paraphrase, context=strict)["cached"]
    assert ask(ANNUAL, context=strict)["cached"]


def test_no_cache_runs_everything_and_stores_nothing(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CRAG_CACHE")  # the CLI's default: on
    # the one-page answer scores 0.62: `correct` (and so cached) at this library's upper
    base = ["ask", ANNUAL, "--home", str(home), "--tenant", "acme", "--no-llm", "--json"]
    base += ["--set", "upper=0.6"]
    assert main([*base, "--no-cache"]) == 0 and main([*base, "--no-cache"]) == 0
    assert json.loads(capsys.readouterr().out.split("\n}\n")[1] + "\n}")["cached"] is False
    assert entries(_ctx(home)) == 0
    assert main(base) == 0 and main(base) == 0
    first, second = capsys.readouterr().out.split("\n}\n", 1)
    assert json.loads(first + "\n}")["cached"] is False
    assert json.loads(second)["cached"] is True
    assert main([*base, "--no-cache"]) == 0  # a cached answer is not served either
    assert json.loads(capsys.readouterr().out)["cached"] is False


def test_a_follow_up_is_looked_up_as_its_standalone_question(home: Path) -> None:
    ctx = _ctx(home)
    ask(PORT, context=ctx, thread_id="t1")
    assert ask(PORT, context=ctx, thread_id="t2")["cached"]  # a new thread, the same question
    ask(ANNUAL, context=ctx, thread_id="t3")
    state = ask(f"And {PORT[0].lower()}{PORT[1:]}", context=ctx, thread_id="t3")
    assert state["question"] != f"And {PORT}" and "follow-up" in state["path"][0]["detail"]
    assert not state["cached"]  # read with the refund question, it asks something else
    # a hit continues the conversation like any answer
    state = ask(PORT, context=ctx, thread_id="t3")
    assert state["cached"] and state["messages"][-1].content == state["answer"]


def test_an_unreadable_cache_is_skipped_with_a_warning(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (home / CACHE_FILE).write_bytes(b"not a database" * 100)
    with caplog.at_level(logging.WARNING):
        state = ask(ANNUAL, context=_ctx(home))
    assert state["answered"] and not state["cached"]
    assert "answer cache" in caplog.text and "delete the file" in caplog.text


def test_a_cached_answer_on_a_thread_carries_nothing_of_the_turn_before(home: Path) -> None:
    ctx = _ctx(home)
    ask(ANNUAL, context=ctx)  # now in the cache
    before = summary(ask(PORT, context=ctx, thread_id="t"))
    assert before["route"] and before["scores"] and not before["cached"]
    state = ask(ANNUAL, context=ctx, thread_id="t")
    result = summary(state)
    assert result["cached"] and "45 days" in result["answer"]
    # every key the cached run does not write is empty, not the last turn's
    assert result["route"] is None and result["scores"] == [] and result["conflicts"] == []
    assert result["missing_terms"] == [] and result["parts"] == []
    assert state["question"] == ANNUAL and len(state["messages"]) == 4  # the conversation stays


def test_every_key_of_a_run_starts_empty_but_the_conversation() -> None:
    from crag.state import THREAD_KEYS, State, fresh_run

    fresh = fresh_run()
    assert set(fresh) | THREAD_KEYS == set(State.__annotations__)
    assert not set(fresh) & THREAD_KEYS
    assert fresh["route"] is None and fresh["conflicts"] == [] and fresh["confidence"] == 0.0
    fresh["docs"].append("x")
    assert fresh_run()["docs"] == []  # no run shares another's lists


def test_a_question_turned_by_a_small_word_is_another_question(home: Path) -> None:
    ctx = _ctx(home)
    embedder = embeddings_for(ctx)
    for asked, earlier in (
        ("Which plans include SSO?", "Which plans do not include SSO?"),
        ("What happens before a plan renews?", "What happens after a plan renews?"),
        ("Can admins export invoices?", "Can't admins export invoices?"),
        ("Is the report available to admins?", "Is the report available only to admins?"),
    ):
        assert not cache.same_question(asked, earlier, embedder), (asked, earlier)
    assert cache.same_question(ANNUAL, "For annual plans, how long is the refund window?", embedder)
    ask(ANNUAL, context=ctx)
    assert not ask("How long is the refund window for annual plans only?", context=ctx)["cached"]


def test_an_answer_from_a_library_changed_during_its_run_is_not_stored(
    home: Path, tmp_path: Path
) -> None:
    ctx = _ctx(home, "globex")
    started = cache.version(ctx)
    seen: list[str] = []
    library = tmp_path / "docs" / "globex" / "library"
    (library / "notes.md").write_text("# Quillon notes\n\nQuillon notes.\n", encoding="utf-8")

    def during(event: dict[str, Any]) -> None:
        if event["event"] == "file_done":  # a run reading now sees the library mid-change
            seen.append(cache.version(ctx) or "")

    assert ingest_path(Context(home=home, tenant="globex"), library, on_event=during).exit_code == 0
    after = cache.version(ctx)
    assert after not in {started, *seen}  # the ingest's last write gives a version of its own
    sure = {"verdict": "correct", "answered": True, "support": "supported", "answer": "21 days"}
    assert not cache.store(ctx, ANNUAL, sure, started)
    assert not cache.store(ctx, ANNUAL, sure, seen[-1])
    assert cache.store(ctx, ANNUAL, sure, after) and entries(ctx) == 1


def test_a_higher_confidence_bar_applies_to_answers_already_cached(home: Path) -> None:
    ctx = _ctx(home)
    first = ask(ANNUAL, context=ctx)
    assert ask(ANNUAL, context=ctx)["cached"]
    stricter = ctx.with_overrides(cache_min_confidence=min(1.0, first["confidence"] + 0.01))
    assert not ask(ANNUAL, context=stricter)["cached"]


def test_a_lookup_embeds_the_question_outside_any_transaction(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = _ctx(home)
    ask(ANNUAL, context=ctx)
    embedder = embeddings_for(ctx)
    writable: list[bool] = []

    def embed_query(text: str) -> list[float]:
        with closing(sqlite3.connect(home / CACHE_FILE, timeout=0)) as other:
            other.execute("BEGIN IMMEDIATE")  # another process may write meanwhile
            writable.append(True)
            other.rollback()
        return type(embedder).embed_query(embedder, text)

    monkeypatch.setattr(embedder, "embed_query", embed_query)
    monkeypatch.setattr("crag.cache.embeddings_for", lambda _ctx: embedder)
    assert cache.lookup(ctx, ANNUAL, cache.version(ctx)) is not None and writable == [True]


def test_the_key_names_the_trained_grader_a_judge_falls_back_to_and_the_server(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = _ctx(home).with_overrides(grader="judge")
    path = trained_path(judge)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}", encoding="utf-8")
    before = cache.scope(judge)
    os.utime(path, ns=(1, 1))
    assert cache.scope(judge) != before  # its strips and fast path read the trained grader
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    openai = cache.scope(judge)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    assert cache.scope(judge) != openai  # one model name on another server: another model


def test_a_damaged_entry_leaves_the_others_served(home: Path) -> None:
    ctx = _ctx(home)
    ask(ANNUAL, context=ctx)
    with closing(sqlite3.connect(home / CACHE_FILE)) as db, db:
        row = db.execute("SELECT tenant, scope, library, question, vector FROM answers").fetchone()
        damaged = [(*row[:3], "a cut vector", row[4][:7], "{}"), (*row, "[not json")]
        for values in damaged:
            db.execute(
                "INSERT INTO answers (tenant, scope, library, question, vector, result, stored, "
                "used) VALUES (?, ?, ?, ?, ?, ?, 0, 0)",
                values,
            )
    state = ask(ANNUAL, context=ctx)
    assert state["cached"] and "45 days" in state["answer"]
