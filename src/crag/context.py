"""Every knob of a crag run, in small groups.

`Context` is the graph's `context_schema`: a node reads the group it needs
(`ctx.grading.upper`). Each knob also has a flat name, unique across groups (`upper`,
`cache_threshold`), that `CRAG_<NAME>`, `CRAG_HOME/settings.json`, `--set NAME=VALUE`
and `Context(upper=0.6)` all use. Precedence: arguments (even one equal to the
default), then environment, then settings, then defaults; an error names the knob,
the value and where it came from.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from crag.settings import (
    CHECKS,
    ENV_PREFIX,
    SETTINGS_FILE,
    Knob,
    knob,
    knob_table,
    load_settings,
    typed,
)

#: The tenant of a single-user library (and of chunks ingested before tenants existed).
DEFAULT_TENANT = "default"
_TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

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
class Store:
    """Where the library lives and how its books are cut into chunks."""

    home: Path = knob(Path(".crag"), "Data folder: Chroma index, model cache, trained grader.")
    chroma_url: str | None = knob(
        None, "Chroma server URL (http://host:port); embedded store if unset."
    )
    collection: str = knob("books", "Library collection.")
    tenant: str = knob(
        DEFAULT_TENANT,
        "Whose library: every chunk, cached answer and generated training pair belongs to "
        "one tenant, and a run sees only its own. `default` is the single-user library, "
        "including chunks ingested before tenants existed.",
    )
    chunk_size: int = knob(900, "Target chunk size (chars, at least 100).", check="count")
    chunk_overlap: int = knob(150, "Chunk overlap (chars).", check="amount", tuning=True)

    @property
    def chroma_path(self) -> Path:
        return self.home / "chroma"

    @property
    def tenant_dir(self) -> Path:
        """What crag keeps of the tenant's own in HOME (the default tenant's: HOME itself)."""
        if self.tenant == DEFAULT_TENANT:
            return self.home
        return self.home / "tenants" / self.tenant

    @property
    def grader_dir(self) -> Path:
        """The trained grader and its generated pairs: learned from the tenant's library."""
        return self.tenant_dir / "grader"


@dataclass
class Models:
    """Which models embed, answer and judge, and how long crag waits for them."""

    embeddings: str = knob("local", "`local` (MiniLM int8 ONNX) or `openai:<model>`.")
    chat_model: str = knob(
        "local",
        "`local` (Qwen2.5-Coder-1.5B GGUF), `openai:<model>`, or `extractive` (no LLM: "
        "answer with the best kept strips).",
    )
    judge_model: str | None = knob(
        None, "Chat model used by the LLM judge; defaults to chat_model."
    )
    max_answer_tokens: int = knob(320, "Upper bound on generated answer tokens.", check="amount")
    model_cache: Path = knob(
        Path("~/.cache/crag"), "Where the local GGUF model is assembled once (1.1 GB)."
    )
    threads: int = knob(0, "CPU threads for local models (0 = all cores).", check="amount")
    local_slots: int = knob(
        1,
        "Calls the local chat model decodes together; the rest wait, first come, first "
        "served by run (1: on two cores more slots gain nothing, prompts are compute-bound).",
        check="count",
    )
    local_queue_timeout_s: float = knob(
        600.0,
        "Longest wait of a call for a free slot of the local chat model (s).",
        check="seconds",
    )
    chat_timeout_s: float = knob(
        180.0,
        "Timeout of each call to an `openai:` chat model (s); long enough for a small model "
        "on a laptop CPU behind an OpenAI-compatible server.",
        check="seconds",
    )
    embeddings_timeout_s: float = knob(
        60.0, "Timeout of each call to `openai:` embeddings (s).", check="seconds"
    )


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
        "one, else embedding similarity), `similarity`, `features` (the feature evaluator), "
        "`cascade` (offline, then the LLM judge for the uncertain band), `mean` (offline and "
        "the LLM judge averaged on every document), `judge`, `trained`, `reader` (the "
        "cross-encoder `crag train-reader` saves; see reader_file), or "
        "`cross-encoder:<model>` (a hub cross-encoder or reranker; needs crag[hub]).",
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
class Search:
    """Where the web path looks when the library is not enough, and what may leave the machine."""

    sources: str = knob(
        "sql,external",
        "Where the web path looks, in order, stopping once the results suffice: `sql` "
        "(sql_path), `external` (the source named by `external`), or a source's own name.",
    )
    external: str = knob(
        "local",
        "`local` (a second Chroma collection), `tavily`, or `none` (decline when the library "
        "has nothing).",
    )
    external_collection: str = knob("external", "Collection used by external=local.")
    web_k: int = knob(5, "External results per search.", check="count")
    tavily_base_url: str | None = knob(
        None, "Tavily API base URL (tests point it at loopback).", tuning=True
    )
    sql_path: Path | None = knob(
        None,
        "A SQLite database for structured questions (prices, specs, counts), read-only, "
        "SELECT only.",
    )
    sql_max_rows: int = knob(
        20, "At most this many rows per SQL query.", check="count", tuning=True
    )
    sql_timeout_s: float = knob(5.0, "Timeout of each SQL query (s).", check="seconds", tuning=True)
    timeout_s: float = knob(
        30.0, "Timeout of each external search and Chroma server call (s).", check="seconds"
    )
    redact_queries: bool = knob(
        True,
        "Mask e-mail addresses, phone numbers, keys, tokens, card numbers and user paths in "
        "what leaves the machine: queries to an external search, and all text sent to "
        "`openai:` chat models and embeddings not on loopback (off for a trusted provider).",
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


GROUPS: dict[str, type] = {
    "store": Store,
    "models": Models,
    "retrieval": Retrieval,
    "grading": Grading,
    "search": Search,
    "refinement": Refinement,
    "confidence": Confidence,
    "generation": Generation,
    "cache": Cache,
}


#: Every knob by flat name.
KNOBS: dict[str, Knob] = knob_table(GROUPS)


@dataclass(init=False)
class Context:
    """Configuration of one run: arguments, then `CRAG_*` env vars, then settings.json.

    `Context(k=8, upper=0.6)` takes knobs by flat name; `Context(grading={"upper": 0.6})`
    takes a group as a mapping (what a server sends as JSON) or as its dataclass."""

    store: Store = field(metadata={"description": Store.__doc__})
    models: Models = field(metadata={"description": Models.__doc__})
    retrieval: Retrieval = field(metadata={"description": Retrieval.__doc__})
    grading: Grading = field(metadata={"description": Grading.__doc__})
    search: Search = field(metadata={"description": Search.__doc__})
    refinement: Refinement = field(metadata={"description": Refinement.__doc__})
    confidence: Confidence = field(metadata={"description": Confidence.__doc__})
    generation: Generation = field(metadata={"description": Generation.__doc__})
    cache: Cache = field(metadata={"description": Cache.__doc__})

    def __init__(self, **given: Any) -> None:
        for group, cls in GROUPS.items():
            object.__setattr__(self, group, cls())
        explicit = _flat(given, "argument")
        origins: dict[str, str] = {}
        for name, value in explicit.items():
            origins[name] = "argument"
            self._set(name, value, "argument")
        for name in KNOBS:
            raw = os.environ.get(ENV_PREFIX + name.upper())
            if name not in origins and raw is not None:
                origins[name] = ENV_PREFIX + name.upper()
                self._set(name, raw, origins[name])
        self.store.home = Path(self.store.home).expanduser()
        where = str(self.store.home / SETTINGS_FILE)
        for name, value in _flat(load_settings(self.store.home), where, strict=False).items():
            if name not in origins and name != "home":
                origins[name] = where
                self._set(name, value, where)
        self.models.model_cache = Path(self.models.model_cache).expanduser()
        object.__setattr__(self, "_explicit", explicit)
        object.__setattr__(self, "_origins", origins)
        self.validate()

    def get(self, name: str) -> Any:
        """A knob's value by flat name (`ctx.get("upper")` is `ctx.grading.upper`)."""
        spec = KNOBS[name]
        return getattr(getattr(self, spec.group), spec.attr)

    def items(self) -> Iterator[tuple[Knob, Any]]:
        """Every knob with its value, group by group."""
        for spec in KNOBS.values():
            yield spec, self.get(spec.name)

    def _set(self, name: str, value: Any, origin: str) -> None:
        """Set a knob from an argument, env var or settings file, typed and checked."""
        spec = KNOBS[name]
        try:
            setattr(getattr(self, spec.group), spec.attr, typed(value, spec.annotation))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name}={value!r} (from {origin}): {exc}") from exc

    def origin(self, name: str) -> str:
        """Where a knob's value came from: an argument, an env var, a file, or the default."""
        return getattr(self, "_origins", {}).get(name, "default")

    def validate(self) -> None:
        """Reject contradictory knobs early, naming the knob at fault and its origin."""

        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"{name}={self.get(name)!r} (from {self.origin(name)}): {why}")

        for spec, value in self.items():
            if spec.check and not CHECKS[spec.check][0](value):  # NaN fails every check
                raise bad(spec.name, CHECKS[spec.check][1])
        if not sum(self.get(f"weight_{signal}") for signal in SIGNALS) > 0:
            raise bad("weight_relevance", "the confidence weights must not all be 0")
        if self.store.chunk_size < 100:
            raise bad("chunk_size", "must be >= 100 (characters)")
        grading, search, store = self.grading, self.search, self.store
        if grading.lower > grading.upper:
            raise bad("lower", f"must not exceed upper={grading.upper}")
        if grading.cascade_low > grading.cascade_high:
            raise bad("cascade_low", f"must not exceed cascade_high={grading.cascade_high}")
        if not [s for s in search.sources.split(",") if s.strip()]:
            raise bad("sources", "must name at least one source, e.g. sql,external")
        if search.sql_path is not None:
            search.sql_path = Path(search.sql_path).expanduser()
        if grading.grader_file is not None:
            grading.grader_file = Path(grading.grader_file).expanduser()
        if not 1 <= self.refinement.strip_sentences <= 3:
            raise bad("strip_sentences", "must be 1-3")
        for key, value in self.confidence.authority.items():
            if isinstance(value, str) and value not in AUTHORITY_OF_KIND:
                kinds = ", ".join(AUTHORITY_OF_KIND)
                raise bad("authority", f"{key!r}: unknown kind {value!r}; use {kinds} or 0-1")
            if isinstance(value, float) and not 0.0 <= value <= 1.0:
                raise bad("authority", f"{key!r}: must be a number from 0 to 1")
        if not _TENANT_NAME.fullmatch(store.tenant or ""):
            raise bad(
                "tenant",
                "use 1-64 characters from a-z, A-Z, 0-9, '.', '_' and '-', "
                "starting with a letter or digit",
            )
        if store.chunk_overlap >= store.chunk_size:
            raise bad("chunk_overlap", f"must be smaller than chunk_size={store.chunk_size}")

    def with_overrides(self, **overrides: Any) -> Context:
        """A copy with some knobs changed (None values are ignored). Knobs the caller
        never gave are resolved again, so `home=` brings that home's settings.json."""
        given = {n: self.get(n) for n in getattr(self, "_explicit", {})}
        changed = {k: v for k, v in _flat(overrides, "argument").items() if v is not None}
        return Context(**given | changed)


def knob_named(key: str) -> Knob:
    """The knob a flat name (`upper`) or a `group.field` name (`grading.upper`) means."""
    group, dot, attr = key.strip().rpartition(".")
    if dot:
        found = next((k for k in KNOBS.values() if (k.group, k.attr) == (group, attr)), None)
    else:
        found = KNOBS.get(attr)
    if found is None:
        raise ValueError(f"unknown knob {key!r}: `crag config` lists them")
    return found


def _flat(values: dict[str, Any], origin: str, *, strict: bool = True) -> dict[str, Any]:
    """Knobs by flat name from flat names, `group.field` keys and groups (a mapping or the
    group's dataclass); an unknown name is an error (`strict`) or ignored."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key in GROUPS and isinstance(value, dict | GROUPS[key]):
            items = value.items() if isinstance(value, dict) else vars(value).items()
            out |= _flat({f"{key}.{a}": v for a, v in items}, origin, strict=strict)
            continue
        try:
            out[knob_named(key).name] = value
        except ValueError as exc:
            if strict:
                raise ValueError(f"{exc} (from {origin})") from None
    return out


def context_from(value: Context | dict[str, Any] | None) -> Context:
    """The run's Context from what LangGraph hands a node: the Context itself, a plain
    dict (a server passes JSON), or nothing (a caller gave none: env and defaults)."""
    if value is None:
        return Context()
    if isinstance(value, dict):
        return Context(**value)
    return value
