"""The knobs of the CRAG method itself, in small groups: what is retrieved, how it is
graded, refined and rated, how an answer is checked, and the answer cache. Where the
library lives and which models and sources serve it are in `crag.context`, which
gathers every group into one `Context`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from crag.settings import knob

#: How far crag trusts a source by its kind (`authority` changes any of them). A book in
#: the user's library and a vendor's official documentation are edited and answerable
#: for; news is edited but hurried; a blog is one author's view; a forum post is anyone's.
#: A web result of unknown kind counts as a blog.
AUTHORITY_OF_KIND: dict[str, float] = {
    "library": 0.9,
    "official": 0.9,
    "news": 0.6,
    "blog": 0.5,
    "web": 0.5,
    "forum": 0.2,
}
SIGNALS = ("relevance", "completeness", "recency", "authority")


@dataclass
class Retrieval:
    """What is fetched from the library for a question."""

    k: int = knob(
        10, "Chunks graded and refined per question: the best of `candidates`.", check="count"
    )
    candidates: int = knob(
        10,
        "Chunks retrieved and scored per question; the best `k` of them are graded and "
        "refined (more than k: the grader reranks a deeper set).",
        check="count",
    )
    decompose: bool = knob(
        True,
        "Split a comparison or multi-part question into 2-4 parts, each retrieved and "
        "graded on its own.",
        tuning=True,
    )
    max_question_chars: int = knob(
        4000, "Longer questions are refused (bounded work on any input).", check="count"
    )


@dataclass
class Grading:
    """How retrieved chunks are scored, and the thresholds that turn scores into a verdict."""

    grader: str = knob(
        "auto",
        "`auto` (`offline`; with a chat model on a server, openai:<model>, as judge_model or "
        "chat_model: `cascade`), `offline` (the trained grader if `crag train-grader` saved "
        "one, else embedding similarity), `similarity`, `cascade` (offline, then the LLM "
        "judge for the uncertain band), `judge`, `cross-encoder:<model>` (a hub "
        "cross-encoder or reranker; needs crag[hub]), or the lab's: `features` (the feature "
        "evaluator), `trained`, `mean` (offline and the LLM judge averaged on every "
        "document), `reader` (the cross-encoder `crag train-reader` saves; see reader_file).",
    )
    grader_file: Path | None = knob(
        None,
        "A grader saved by `crag train-grader` (grader.json) to grade with instead of the one "
        "in HOME/grader (e.g. one trained on another library).",
        tuning=True,
    )
    reader_file: Path | None = knob(
        None,
        "Reader: a model saved by `crag train-reader` (reader.onnx, with reader.json beside "
        "it) to grade with instead of the one crag ships.",
        tuning=True,
    )
    strip_weight: float = knob(
        0.5,
        "Similarity: weight of a passage's best strip in its score (0: the whole passage's "
        "cosine; 1: the better of the two), so a long chunk that answers in one sentence "
        "is not averaged away.",
        check="share",
        tuning=True,
    )
    upper: float = knob(0.60, "Verdict `correct` if any document scores >= upper.", check="share")
    lower: float = knob(
        0.60,
        "Verdict `incorrect` if every document scores < lower; good documents score >= lower.",
        check="share",
    )
    cascade_low: float = knob(
        0.25,
        "Cascade: a first score below this is settled as irrelevant.",
        check="share",
        tuning=True,
    )
    cascade_high: float = knob(
        0.75,
        "Cascade: a first score at or above this is settled relevant.",
        check="share",
        tuning=True,
    )
    judge_weight: float = knob(
        0.5,
        "Mean: the LLM judge's weight in a document's score (the offline grader's: 1 - it).",
        check="share",
        tuning=True,
    )
    coverage_check: bool = knob(
        True,
        "A question with terms the library never mentions, or comparing something it names "
        "only in passing, is at best `ambiguous` (the library can answer only part of it).",
        tuning=True,
    )
    fast_path: bool = knob(
        True,
        "A simple question whose best chunk clearly wins is answered from that chunk alone "
        "(no LLM judge, no decomposition).",
        tuning=True,
    )
    fast_gap: float = knob(
        0.15,
        "Fast path: how far the best chunk's score must lead the next (besides reaching upper).",
        check="share",
        tuning=True,
    )


@dataclass
class Refinement:
    """Knowledge refinement: documents cut into strips, the relevant strips kept."""

    refine: bool = knob(True, "Knowledge refinement on (off for ablation).", tuning=True)
    strip_sentences: int = knob(2, "Sentences per strip (1-3).", tuning=True)
    strip_threshold: float = knob(
        0.10, "Strips scoring below this are dropped.", check="share", tuning=True
    )
    max_strips: int = knob(12, "At most this many strips kept.", check="count", tuning=True)
    dedup_threshold: float = knob(
        0.9,
        "Strips whose embeddings' cosine reaches this (and that state the same numbers and "
        "dates) are one fact: only the more confident one is kept.",
        check="share",
        tuning=True,
    )


@dataclass
class Confidence:
    """What orders documents and strips, and settles sources that disagree."""

    weight_relevance: float = knob(
        0.6,
        "Weight of the grader's relevance score in the composite.",
        check="share",
        tuning=True,
    )
    weight_completeness: float = knob(
        0.1,
        "Weight of completeness (share of the question covered).",
        check="share",
        tuning=True,
    )
    weight_recency: float = knob(
        0.2,
        "Weight of recency (the document's date, decaying).",
        check="share",
        tuning=True,
    )
    weight_authority: float = knob(
        0.1,
        "Weight of authority (the source's kind, see `authority`).",
        check="share",
        tuning=True,
    )
    timely_recency_weight: float = knob(
        0.5,
        "The recency weight for a time-sensitive question ('latest', 'current', 'as of', a "
        "year), when it is higher than weight_recency.",
        check="share",
        tuning=True,
    )
    recency_half_life_days: float = knob(
        365.0,
        "Age (days) at which a document's recency halves.",
        check="days",
        tuning=True,
    )
    authority: dict[str, float | str] = knob(
        {},
        "Authority overrides, a JSON object: a kind (library, official, news, blog, web, "
        "forum) to a number, or a source (file, folder/, glob, web host or URL prefix) to a "
        "number or a kind.",
    )
    conflicts: Literal["auto", "rule", "model", "off"] = knob(
        "auto",
        "Sources that give different values for the question: resolved by `rule` (values "
        "read from the text), `model` (one chat model call, the rule if it fails), `auto` "
        "(model unless chat_model=extractive) or `off`.",
    )
    source_priority: Literal["auto", "internal-first", "web-first"] = knob(
        "auto",
        "Ambiguous path: which side leads the context, the library (`internal-first`) or the "
        "web (`web-first`); `auto`: web first for a time-sensitive question.",
    )


@dataclass
class Generation:
    """How an answer is written and checked."""

    verify: bool = knob(
        True,
        "Check the answer's evidence against the question's years, dates, versions and "
        "names; decline when it speaks of others.",
        tuning=True,
    )
    verify_claims: bool = knob(
        False,
        "With a language model, also check each answer sentence against its sources (one "
        "judge_model call) and drop those they do not state. Off by default: the local 1.5B "
        "model drops sentences its sources do state.",
    )
    near_miss_answers: bool = knob(
        False,
        "When the evidence answers a neighbouring question (2022 instead of 2023), say so "
        "and answer it instead of declining.",
    )

    @property
    def checks_claims(self) -> bool:
        """Whether a model's answer has each sentence checked by the judge."""
        return self.verify and self.verify_claims


@dataclass
class Cache:
    """The tenant's cache of confident answers."""

    enabled: bool = knob(
        True,
        "Answer again from the tenant's cache of confident answers (verdict `correct`, "
        "answer verified) when an earlier question asked the same; `--no-cache` runs the "
        "whole graph and stores nothing.",
        name="cache",
    )
    threshold: float = knob(
        0.90,
        "A cached answer serves a question whose embedding has at least this cosine "
        "similarity to the cached one's (and the same years, versions, names and words, "
        "synonyms aside).",
        name="cache_threshold",
        check="share",
        tuning=True,
    )
    size: int = knob(
        1000,
        "Cached answers kept per tenant; the least recently used go.",
        name="cache_size",
        check="count",
    )
    min_confidence: float = knob(
        0.0,
        "An answer whose state carries a `confidence` below this is never cached (answers "
        "without one are judged by verdict and verification alone).",
        name="cache_min_confidence",
        check="share",
        tuning=True,
    )
