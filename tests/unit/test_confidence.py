"""Composite confidence: the signals, the weights, duplicates and conflicting sources.

Refinement and generation run on hand-made states with a word-overlap grader and
bag-of-words embeddings, so each test controls exactly what the sources say, when
they were written and what kind of source they are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from answering import answer_of
from fakes import FakeEmbeddings
from langgraph.runtime import Runtime

from crag.context import Context
from crag.grading import conflicts
from crag.grading.confidence import (
    NEUTRAL,
    Weights,
    authority,
    completeness,
    rate,
    recency,
    weights_for,
)
from crag.grading.outcome import probability, signals
from crag.grading.question_form import slot, time_sensitive
from crag.models.remembering import Remembering
from crag.nodes import refine as refine_module
from crag.nodes.refine import deduplicate, refine
from crag.prompts import SourceValue, SourceValues
from crag.source_kind import detect_kind
from crag.state import Passage, State, Strip
from crag.text import content_words

TODAY = date.today()
QUESTION = "What is the default listener port of the Tessaro broker?"


class OverlapGrader:
    """Relevance as the share of the question's content words a passage holds."""

    name = "overlap"

    async def ascore(self, question: str, passages: Sequence[str]) -> list[float]:
        asked = set(content_words(question))
        return [len(asked & set(content_words(p))) / len(asked) for p in passages]


@pytest.fixture(autouse=True)
def fakes(monkeypatch: pytest.MonkeyPatch) -> FakeEmbeddings:
    embeddings = FakeEmbeddings()
    remembering = Remembering(embeddings)
    monkeypatch.setattr(refine_module, "make_strip_grader", lambda ctx: OverlapGrader())
    monkeypatch.setattr(refine_module, "embeddings_for", lambda ctx: remembering)
    return embeddings


def ctx(**knobs: Any) -> Context:
    knobs = {"chat_model": "extractive", "strip_threshold": 0.3, **knobs}
    return Context(home=Path("/nonexistent-crag-home"), **knobs)


def doc(
    i: str, text: str, *, age_days: int | None = None, kind: str = "", score: float = 0.8
) -> Passage:
    p: Passage = {"id": i, "text": text, "origin": "library", "source": f"{i}.md", "score": score}
    if age_days is not None:
        p["date"] = (TODAY - timedelta(days=age_days)).isoformat()
        p["dated_by"] = "text"
    if kind:
        p["kind"] = kind
    return p


def run(docs: list[Passage], question: str = QUESTION, **knobs: Any) -> dict[str, Any]:
    """refine, generate and verify, on the correct path; the final state (path: refine's
    step, then generate's and verify's)."""
    state: State = {"question": question, "docs": docs, "good_docs": docs, "verdict": "correct"}
    runtime = Runtime(context=ctx(**knobs))
    refined = asyncio.run(refine(state, runtime=runtime))
    state = {**state, **refined}  # type: ignore[typeddict-item]
    answered = asyncio.run(answer_of(state, runtime=runtime))
    return {**state, **answered, "path": refined["path"] + answered["path"]}


STALE = "The default listener port of the Tessaro broker is 5570."
FRESH = "The default listener port of the Tessaro broker is 5680."


def test_the_newer_source_wins_and_the_answer_names_the_conflict() -> None:
    out = run([doc("old", STALE, age_days=4 * 365), doc("new", FRESH, age_days=30)])
    assert [s["doc_id"] for s in out["kept_strips"]] == ["new"]
    [conflict] = out["conflicts"]
    assert conflict["preferred"] == "new" and conflict["by"] == "rule"
    assert {v["value"] for v in conflict["values"]} == {"5570", "5680"}
    assert "5680" in out["answer"] and "5570" not in out["answer"]
    assert "sources disagree" in out["answer"] and "old.md" in out["answer"]
    assert "newer" in out["answer"]
    assert "sources disagree" in out["path"][0]["detail"]
    # relevance alone and no resolution: both values reach the answer, no word of it
    plain = run(
        [doc("old", STALE, age_days=4 * 365), doc("new", FRESH, age_days=30)],
        conflicts="off",
    )
    assert "5570" in plain["answer"] and "5680" in plain["answer"]
    assert plain["conflicts"] == [] and "disagree" not in plain["answer"]


def test_two_strips_of_a_source_are_not_read_as_one_sentence() -> None:
    """A page that ends mid-sentence ("... and pass the file; it runs as user 1500.")
    beside another strip of its source: joined, the two would make one sentence that
    speaks of the question and states 1500; strip by strip neither does."""
    near = "The Tessaro broker guide covers the default listener and the port."
    cut = "and pass the file in as /etc/tessaro.conf; the image runs as user 1500."
    strips: list[Strip] = [
        {"doc_id": "docs", "text": FRESH, "score": 0.9, "position": 0},
        {"doc_id": "guide", "text": near, "score": 0.9, "position": 1},
        {"doc_id": "guide", "text": cut, "score": 0.5, "position": 2},
    ]
    docs = [doc("docs", FRESH), doc("guide", f"{near} {cut}")]
    found = conflicts.claimants(QUESTION, "number", strips, docs)
    assert [c.values for c in found] == [{"5680"}, set()]
    assert conflicts.settle(found, weights_for(ctx(), QUESTION)[0], "rule")[0] is None


def test_with_authority_reversed_the_authoritative_source_wins() -> None:
    same_day = [doc("forum", STALE, age_days=100, kind="forum"), doc("docs", FRESH, age_days=100)]
    out = run(same_day)
    assert out["conflicts"][0]["preferred"] == "docs"
    assert "more authoritative" in out["conflicts"][0]["reason"]
    assert "5680" in out["answer"] and "5570" not in out["answer"]
    # the user trusts that forum more than this library (per kind, then per source)
    for override in ({"forum": 0.95, "library": 0.1}, {"forum.md": 1.0}):
        out = run(same_day, authority=override)
        assert out["conflicts"][0]["preferred"] == "forum"
        assert "5570" in out["answer"] and "5680" not in out["answer"]


def test_a_changelog_that_names_both_values_does_not_contradict_the_manual() -> None:
    changelog = "The default listener port of the Tessaro broker changed from 5570 to 5680."
    out = run([doc("manual", STALE, age_days=900), doc("log", changelog, age_days=10)])
    assert out["conflicts"] == []
    assert {s["doc_id"] for s in out["kept_strips"]} == {"manual", "log"}


def test_sources_giving_the_same_answer_beside_other_figures_agree() -> None:
    question = "How much does the Tessaro Team plan cost per month?"
    page = "The Tessaro Team plan costs USD 8 a month or USD 80 a year."
    news = "The Tessaro Team plan now costs USD 8 a month, up from USD 6 last year."
    out = run([doc("pricing", page, age_days=30), doc("news", news, age_days=10)], question)
    assert out["conflicts"] == []
    assert {s["doc_id"] for s in out["kept_strips"]} == {"pricing", "news"}
    # a source naming other figures beside its answer still disagrees with another answer
    question = "Which port does the Tessaro API listen on?"
    manual = "The Tessaro API listens on port 7420; the admin console uses port 8080."
    forum = "The Tessaro API listens on port 9000 on my server."
    out = run([doc("manual", manual, age_days=30), doc("forum", forum, age_days=10)], question)
    [conflict] = out["conflicts"]
    assert {v["value"] for v in conflict["values"]} == {"7420, 8080", "9000"}


def test_duplicates_collapse_to_one_strip_from_the_more_confident_source() -> None:
    text = "Tessaro keeps messages for 14 days. The listener port is 5680 by default."
    out = run(
        [doc("copy", text, age_days=2000), doc("original", text, age_days=10)],
        question="How long does Tessaro keep messages, and which listener port is default?",
    )
    kept = out["kept_strips"]
    assert [s["text"] for s in kept] == [text]
    assert kept[0]["doc_id"] == "original"  # the newer copy is the more confident one
    assert "repeating a more confident strip" in out["path"][0]["detail"]


def test_strips_alike_in_words_but_not_in_figures_are_no_duplicates() -> None:
    vectors = {t: np.asarray([1.0, 0.0]) for t in (STALE, FRESH)}
    strips: list[Strip] = [
        {"doc_id": "a", "position": 0, "text": FRESH, "score": 0.9},
        {"doc_id": "b", "position": 10_000, "text": STALE, "score": 0.8},
    ]
    kept, dropped = deduplicate(strips, vectors, threshold=0.9)
    assert kept == strips and dropped == 0
    kept, dropped = deduplicate([strips[0], {**strips[0], "doc_id": "c"}], vectors, 0.9)
    assert len(kept) == 1 and dropped == 1


def test_an_undated_document_is_neither_favoured_nor_buried() -> None:
    half_life = 365.0
    assert recency(None, TODAY, half_life) == NEUTRAL
    assert recency(TODAY, TODAY, half_life) == 1.0
    assert recency(TODAY - timedelta(days=365), TODAY, half_life) == pytest.approx(0.5)
    assert recency(TODAY + timedelta(days=9), TODAY, half_life) == 1.0  # a date ahead
    docs = [
        doc("stale", "Tessaro port 5680.", age_days=3 * 365),
        doc("undated", "Tessaro port 5680."),
        doc("fresh", "Tessaro port 5680.", age_days=5),
    ]
    weights, _ = weights_for(ctx(), "Which port does Tessaro use?")
    rated = rate(docs, "Which port does Tessaro use?", ctx(), weights)
    order = sorted(rated, key=lambda d: -d["confidence"])
    assert [d["id"] for d in order] == ["fresh", "undated", "stale"]
    assert order[1]["recency"] == NEUTRAL and "date" not in order[1]


def test_the_weights_change_the_order_as_documented() -> None:
    relevant_but_old = doc("a", "Tessaro listener port 5570.", age_days=3650, score=0.9)
    newer = doc("b", "Tessaro listener port 5680.", age_days=0, score=0.7)
    question = "Which listener port does Tessaro use?"
    c = ctx(weight_recency=0.2)
    weights, _ = weights_for(c, question)
    assert weights == Weights(relevance=0.6, completeness=0.1, recency=0.2, authority=0.1)
    a, b = rate([relevant_but_old, newer], question, c, weights)
    # the composite is the weighted mean of the signals, weights normalised to sum 1
    expected = 0.6 * 0.9 + 0.1 * a["completeness"] + 0.2 * a["recency"] + 0.1 * a["authority"]
    assert a["confidence"] == pytest.approx(expected, abs=1e-4)
    assert b["confidence"] > a["confidence"]  # recency outweighs 0.2 of relevance
    only = ctx(weight_relevance=1, weight_completeness=0, weight_recency=0, weight_authority=0)
    a, b = rate([relevant_but_old, newer], question, only, weights_for(only, question)[0])
    assert (a["confidence"], b["confidence"]) == (0.9, 0.7)  # relevance alone
    # only the ratios of the weights count: halving them all changes nothing
    half = ctx(
        weight_relevance=0.3, weight_completeness=0.05, weight_recency=0.1, weight_authority=0.05
    )
    assert (
        rate([newer], question, half, weights_for(half, question)[0])[0]["confidence"]
        == (rate([newer], question, c, weights)[0]["confidence"])
    )


def test_a_time_sensitive_question_raises_the_recency_weight_and_says_so() -> None:
    assert time_sensitive("What is the latest version of Polder?") == "asks for 'latest'"
    assert time_sensitive("Which plan is current as of 2025?") is not None
    assert time_sensitive("Who won the 2022 final?") == "names the year 2022"
    assert time_sensitive("What is dropout?") is None
    assert time_sensitive("How do currents flow?") is None  # "currents" is not "current"
    weights, why = weights_for(ctx(), "What is the current listener port of Tessaro?")
    assert weights.recency == 0.5 and why == "asks for 'current'"
    assert weights_for(ctx(timely_recency_weight=0.0), "the current port?")[0].recency == 0.2
    timely = QUESTION.replace("is", "is currently")
    out = run([doc("old", STALE, age_days=900), doc("new", FRESH, age_days=9)], timely)
    assert "time-sensitive" in out["path"][0]["detail"]


def test_completeness_counts_terms_or_sub_questions() -> None:
    text = "Tessaro listens on port 5680 and keeps messages for 14 days."
    assert completeness(["Tessaro", "port", "retention"], text) == pytest.approx(2 / 3)
    assert completeness(["ports"], text) == 1.0  # one stem
    subs = ["Which port does Tessaro use?", "For how many days does Tessaro keep messages?"]
    assert completeness(subs, text) == 1.0
    # a sub-question counts by the share of its own key terms ("long" is not in the text)
    assert completeness(["How long does Tessaro keep messages?"], text) == 0.75
    assert completeness(["Which port does Tessaro use?", "Who maintains Vantry?"], text) == 0.5
    assert completeness([], text) == NEUTRAL


@pytest.mark.parametrize(
    ("source", "url", "kind"),
    [
        ("", "https://forum.vendor.example/t/slow-sync/4182", "forum"),
        ("", "https://vendor.example/community/questions/9", "forum"),
        ("", "https://stackoverflow.com/questions/1/x", "forum"),
        ("", "https://blog.vendor.example/release", "blog"),
        ("", "https://vendor.example/blog/2024/notes", "blog"),
        ("", "https://docs.vendor.example/install", "official"),
        ("", "https://project.readthedocs.io/en/latest/", "official"),
        ("", "https://news.paper.example/2026/story", "news"),
        ("", "https://www.vendor.example/pricing", None),
        ("forum/thread_about_sync.md", "", "forum"),
        ("saved/blog_markdown_import.md", "", "blog"),
        ("docs/configuration.md", "", "official"),
        ("books/deep_learning.pdf", "", None),
        ("notes/threading_tips.md", "", None),  # "threading" is not "thread"
    ],
)
def test_a_sources_kind_from_its_address_or_path(source: str, url: str, kind: str | None) -> None:
    assert detect_kind(source, url) == kind


def test_authority_by_kind_and_by_override() -> None:
    web: Passage = {
        "id": "w",
        "text": "x",
        "origin": "external",
        "source": "Sync drops",
        "url": "https://forum.vendor.example/t/1",
    }
    lib: Passage = {"id": "l", "text": "x", "origin": "library", "source": "vendor/blog/a.md"}
    assert authority(web, {}) == (0.2, "forum")
    assert authority(lib, {}) == (0.9, "library")  # the kind read at ingest would say blog
    assert authority({**lib, "kind": "blog"}, {}) == (0.5, "blog")
    assert authority(web, {"vendor.example": 0.7}) == (0.7, "forum")  # a host and its subdomains
    assert authority(web, {"https://forum.vendor.example/": "official"}) == (0.9, "official")
    # the most specific pattern wins
    assert authority(lib, {"vendor/": 0.3, "vendor/blog/": 0.6}) == (0.6, "library")
    assert authority(lib, {"*.md": "news"}) == (0.6, "news")
    assert authority(lib, {"library": 0.4}) == (0.4, "library")  # a kind's own value


class FakeModel:
    """A chat model whose structured reply is given (or that fails)."""

    def __init__(self, reply: object = None, error: Exception | None = None) -> None:
        self.reply, self.error, self.calls = reply, error, 0

    def with_structured_output(self, schema: type) -> FakeModel:
        assert schema is SourceValues
        return self

    async def ainvoke(self, messages: object, config: object = None) -> object:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self.reply


def test_with_a_model_one_call_reads_each_sources_value(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [
        doc("vendor", "Vantry is maintained by Ines Moravec.", age_days=60, kind="official"),
        doc("fan", "Vantry is maintained by the Reyes brothers.", age_days=60, kind="forum"),
    ]
    reply = SourceValues(
        values=[SourceValue(source=1, value="Ines Moravec"), SourceValue(source=2, value="Reyes")]
    )
    model = FakeModel(reply)
    monkeypatch.setattr(conflicts, "make_chat_model", lambda *a, **k: model)
    out = run(texts, "Who maintains Vantry?", conflicts="model")
    assert model.calls == 1
    [conflict] = out["conflicts"]
    assert conflict["by"] == "model" and conflict["preferred"] == "vendor"
    assert [s["doc_id"] for s in out["kept_strips"]] == ["vendor"]
    # a source the model reads nothing from is read by the rule
    model.reply = SourceValues(values=[SourceValue(source=1, value="5680")])
    out = run([doc("old", STALE, age_days=900), doc("new", FRESH, age_days=9)], conflicts="model")
    assert out["conflicts"][0]["preferred"] == "new"
    assert {v["value"] for v in out["conflicts"][0]["values"]} == {"5680", "5570"}
    # the same value in other words is no conflict
    model.reply = SourceValues(
        values=[SourceValue(source=1, value="Ines Moravec"), SourceValue(source=2, value="Moravec")]
    )
    assert run(texts, "Who maintains Vantry?", conflicts="model")["conflicts"] == []


def test_a_failing_model_check_falls_back_to_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    model = FakeModel(error=TimeoutError())
    monkeypatch.setattr(conflicts, "make_chat_model", lambda *a, **k: model)
    out = run([doc("old", STALE, age_days=900), doc("new", FRESH, age_days=9)], conflicts="model")
    assert model.calls == 1
    assert out["conflicts"][0]["by"] == "rule" and out["conflicts"][0]["preferred"] == "new"
    assert "by the model failed (TimeoutError)" in out["path"][0]["detail"]
    model.error, model.reply = None, "not the schema"
    assert run([doc("o", STALE, age_days=900), doc("n", FRESH)], conflicts="model")["conflicts"]


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("What is the default listener port of the Tessaro broker?", "number"),
        ("How many snapshots does Orbitline keep?", "number"),
        ("When will version 1 of the API be switched off?", "date"),
        ("In what year was Vantry first released?", "year"),
        ("What is the latest stable version of Polder?", "version"),
        ("Who maintains Vantry?", "name"),
        ("Which eviction policy does Vantry use?", "name"),
        ("What is dropout?", None),  # a definition, not a value
        ("What is a rate limiter?", None),  # a measure word naming another thing
        ("What is the learning rate schedule?", None),
        ("What is the rate limit?", "number"),
        ("What is the maximum upload size?", "number"),
        ("How do I restore a snapshot?", None),
        ("How did the rate limit change in version 3?", None),  # a change has two values
        ("What does the plan cost, and what does it cost after the change?", None),
        ("What is the difference between LRU and LFU?", None),
    ],
)
def test_which_questions_ask_for_one_value(question: str, kind: str | None) -> None:
    assert slot(question) == kind


def test_the_confidence_does_not_age_with_its_source() -> None:
    fresh = run([doc("new", FRESH, age_days=0, score=0.9)])
    old = run([doc("new", FRESH, age_days=6 * 365, score=0.9)])
    assert old["composite"] < fresh["composite"]  # the source's age orders sources
    assert old["confidence"] == fresh["confidence"]  # and says nothing of the outcome


def test_the_answers_composite_is_that_of_its_sources_and_its_confidence_a_probability() -> None:
    out = run([doc("new", FRESH, age_days=0, score=0.9)])
    assert out["answered"] and out["composite"] == out["ratings"]["new"]["confidence"] > 0.5
    # refinement rates the documents beside them: the graded documents stay as graded
    assert "confidence" not in out["docs"][0]
    # the confidence is the shipped model's probability for this outcome's signals
    said = signals(
        answered=True,
        kept_strips=len(out["kept_strips"]),
        web_scores=[],
        unmet_terms=bool(out.get("missing_terms") or out["unsupported"]),
        decline_reason=None,
    )
    assert out["confidence"] == probability(said) and 0.0 < out["confidence"] < 1.0
    declined = run([])
    assert not declined["answered"] and declined["composite"] == 0.0
    assert 0.0 < declined["confidence"] < 1.0


def test_source_priority_decides_which_side_leads_the_ambiguous_context() -> None:
    library = doc("lib", "Tessaro listens on port 5680 by default, says the guide.", age_days=400)
    web: Passage = {
        **doc("web", "Tessaro listens on port 5680 by default, says the site.", age_days=3),
        "origin": "external",
    }
    base: State = {"question": "", "good_docs": [library], "web_docs": [web]}
    base["verdict"] = "ambiguous"

    def lead(question: str, **knobs: Any) -> list[str]:
        c = ctx(**knobs)
        weights, timely = weights_for(c, question)
        docs, _, split_at = refine_module.ordered(
            {**base, "question": question}, c, weights, refine_module.priority(c, timely)
        )
        assert split_at == 1  # each side still gets its half of the places
        return [d["id"] for d in docs]

    assert lead("Which port does Tessaro use?") == ["lib", "web"]  # auto: the library first
    assert lead("Which port does Tessaro use now, as of 2026?") == ["web", "lib"]  # timely
    assert lead("Which port does Tessaro use?", source_priority="web-first") == ["web", "lib"]
    assert lead("What is the latest port?", source_priority="internal-first") == ["lib", "web"]
    out = run([library])  # off the ambiguous path there are no sides
    assert "first" not in out["path"][0]["detail"]


def test_crag_ask_shows_the_signals_conflicts_and_confidence() -> None:
    from crag.api import summary
    from crag.cli.ask import render

    out = run([doc("old", STALE, age_days=4 * 365), doc("new", FRESH, age_days=30)])
    result = summary(out)  # type: ignore[arg-type]
    assert {"completeness", "recency", "authority", "confidence", "kind"} <= set(
        result["documents"][0]
    )
    assert result["conflicts"][0]["preferred"] == "new" and result["confidence"] > 0
    shown = render({**result, "timings": {}, "path": []})
    assert "sources disagree (rule): new.md: 5680; old.md: 5570" in shown
    assert ", confidence 0." in shown and "conf 0." not in shown  # the table: with -v
    shown = render({**result, "timings": {}, "path": []}, details=True)
    assert "conf 0." in shown and "authority 0.90 library" in shown


def test_crag_ask_says_when_an_answer_is_partly_supported() -> None:
    from crag.api import summary
    from crag.cli.ask import render

    result = {**summary(run([doc("new", FRESH, age_days=30)])), "timings": {}, "path": []}  # type: ignore[arg-type]
    assert result["support"] == "supported" and "partly answered" not in render(result)
    partial = {**result, "support": "partial", "unsupported": ["postgresql"]}
    shown = render(partial)
    assert "partly answered: the sources found do not state postgresql" in shown
    assert shown.index("partly answered") < shown.index("verdict:")  # before the verdict
