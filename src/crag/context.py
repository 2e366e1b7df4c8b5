"""Every knob of a crag run, in one place.

`Context` is the graph's `context_schema`: LangGraph hands it to each node as
`runtime.context`. A field the caller did not give is read from the environment
(`CRAG_<FIELD>`, e.g. `CRAG_K=8`), then from `CRAG_HOME/settings.json` (written by
`crag tune --save`), so the CLI, `langgraph dev` and Python callers share one
configuration. Precedence: arguments (even one equal to the default), then
environment, then settings, then defaults. Every value is type- and range-checked,
and an error names the knob, the value and where it came from.
"""

from __future__ import annotations

import json
import math
import os
import re
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

ENV_PREFIX = "CRAG_"
#: The tenant of a single-user library (and of chunks ingested before tenants existed).
DEFAULT_TENANT = "default"
_TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def _mapping(value: Any, annotation: Any) -> dict[str, Any]:
    """A JSON object (or its text, as an environment variable holds it) as a mapping of
    names to the field's value types: `{"forum": 0.2, "docs/vendor/": "blog"}`."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(f"expected a JSON object, got {value!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    kinds = typing.get_args(typing.get_args(annotation)[1]) or (typing.get_args(annotation)[1],)
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"every key must be a non-empty text, got {key!r}")
        if float in kinds and isinstance(item, int | float) and not isinstance(item, bool):
            out[key] = float(item)
        elif str in kinds and isinstance(item, str):
            out[key] = item
        else:
            expected = " or ".join("a number" if k is float else "a text" for k in kinds)
            raise ValueError(f"{key!r}: expected {expected}, got {item!r}")
    return out


def _coerce(raw: str, annotation: Any) -> Any:
    """Turn an environment string into the field's type, with a clear error."""
    if isinstance(annotation, str):  # postponed annotations
        annotation = eval(annotation, vars(typing) | {"Path": Path})
    origin = typing.get_origin(annotation)
    if origin is dict:
        return _mapping(raw, annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin in (typing.Union, types.UnionType):
        if raw.strip().lower() in ("", "none", "null"):
            return None
        return _coerce(raw, args[0])
    if origin is Literal:
        if raw not in args:
            raise ValueError(f"expected one of {', '.join(map(str, args))}, got {raw!r}")
        return raw
    if annotation is bool:
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected a boolean (true/false), got {raw!r}")
    if annotation in (int, float):
        try:
            return annotation(raw)
        except ValueError:
            kind = "an integer" if annotation is int else "a number"
            raise ValueError(f"expected {kind}, got {raw!r}") from None
    if annotation is Path:
        return Path(raw)
    return raw


def _typed(value: Any, annotation: Any) -> Any:
    """A JSON value as the field's type (text as an environment value would be read)."""
    if typing.get_origin(annotation) is dict:
        return _mapping(value, annotation)
    if isinstance(value, str):
        return _coerce(value, annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if value is None and type(None) in typing.get_args(annotation):
        return None
    kind = args[0] if args else annotation
    if kind is Path and isinstance(value, Path):
        return value
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind is bool and isinstance(value, bool):
        return value
    expected = getattr(kind, "__name__", str(kind))
    raise ValueError(f"expected {expected}, got {type(value).__name__}")


SETTINGS_FILE = "settings.json"

#: How far crag trusts a source by its kind (`Context.authority` changes any of them).
#: A book in the user's library and a vendor's official documentation are edited and
#: answerable for; news is edited but hurried; a blog is one author's view; a forum post
#: is anyone's. A web result of unknown kind counts as a blog.
AUTHORITY_OF_KIND: dict[str, float] = {
    "library": 0.9,
    "official": 0.9,
    "news": 0.6,
    "blog": 0.5,
    "web": 0.5,
    "forum": 0.2,
}
SIGNALS = ("relevance", "completeness", "recency", "authority")


def load_settings(home: Path) -> dict[str, Any]:
    """Knobs saved in CRAG_HOME (e.g. thresholds found by `crag tune`)."""
    path = Path(home).expanduser() / SETTINGS_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: unreadable settings ({exc}); fix or delete it") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object of settings; fix or delete it")
    known = {f.name for f in fields(Context)}
    return {k: v for k, v in data.items() if k in known}


def save_settings(home: Path, values: dict[str, Any]) -> Path:
    """Merge `values` into CRAG_HOME/settings.json; env vars and flags still win."""
    path = Path(home).expanduser() / SETTINGS_FILE
    current = load_settings(home)
    current.update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


@dataclass(kw_only=True)
class Context:
    """Configuration of one run: arguments, then `CRAG_*` env vars, then settings.json."""

    # --- store -------------------------------------------------------------------
    home: Path = field(
        default=Path(".crag"),
        metadata={"description": "Data folder: Chroma index, model cache, trained grader."},
    )
    chroma_url: str | None = field(
        default=None,
        metadata={"description": "Chroma server URL (http://host:port); embedded store if unset."},
    )
    collection: str = field(default="books", metadata={"description": "Library collection."})
    tenant: str = field(
        default=DEFAULT_TENANT,
        metadata={
            "description": "Whose library: every chunk, cached answer and generated training "
            "pair belongs to one tenant, and a run sees only its own. `default` is the "
            "single-user library, including chunks ingested before tenants existed."
        },
    )

    # --- providers ------------------------------------------------------------------
    embeddings: str = field(
        default="local",
        metadata={"description": "`local` (MiniLM int8 ONNX) or `openai:<model>`."},
    )
    chat_model: str = field(
        default="local",
        metadata={
            "description": "`local` (Qwen2.5-Coder-1.5B GGUF), `openai:<model>`, or "
            "`extractive` (no LLM: answer with the best kept strips)."
        },
    )
    grader: str = field(
        default="auto",
        metadata={
            "description": "`auto` (`offline`; with a chat model on a server, openai:<model>, "
            "as judge_model or chat_model: `cascade`), `offline` (the trained grader if "
            "`crag train-grader` saved one, else embedding similarity), `similarity`, "
            "`features` (the feature evaluator), `cascade` (offline, then the LLM judge for "
            "the uncertain band), `judge`, or `trained`."
        },
    )
    judge_model: str | None = field(
        default=None,
        metadata={"description": "Chat model used by the LLM judge; defaults to chat_model."},
    )
    grader_file: Path | None = field(
        default=None,
        metadata={
            "description": "A grader saved by `crag train-grader` (grader.json) to grade "
            "with instead of the one in HOME/grader (e.g. one trained on another library)."
        },
    )

    # --- retrieval and grading ----------------------------------------------------
    k: int = field(
        default=5,
        metadata={
            "description": "Chunks graded and refined per question: the best of `candidates`."
        },
    )
    candidates: int = field(
        default=5,
        metadata={
            "description": "Chunks retrieved and scored per question; the best `k` of them "
            "are graded and refined (more than k: the grader reranks a deeper set)."
        },
    )
    upper: float = field(
        default=0.55,
        metadata={"description": "Verdict `correct` if any document scores >= upper."},
    )
    lower: float = field(
        default=0.55,
        metadata={
            "description": "Verdict `incorrect` if every document scores < lower; "
            "good documents score >= lower."
        },
    )
    coverage_check: bool = field(
        default=True,
        metadata={
            "description": "A question with terms the library never mentions, or comparing "
            "something it names only in passing, is at best `ambiguous` (the library can "
            "answer only part of it)."
        },
    )
    cascade_low: float = field(
        default=0.25,
        metadata={"description": "Cascade: a first score below this is settled as irrelevant."},
    )
    cascade_high: float = field(
        default=0.75,
        metadata={"description": "Cascade: a first score at or above this is settled relevant."},
    )

    # --- routing and the correction cascade ----------------------------------------
    fast_path: bool = field(
        default=True,
        metadata={
            "description": "A simple question whose best chunk clearly wins is answered "
            "from that chunk alone (no LLM judge, no decomposition)."
        },
    )
    fast_gap: float = field(
        default=0.15,
        metadata={
            "description": "Fast path: how far the best chunk's score must lead the next "
            "(besides reaching upper)."
        },
    )
    decompose: bool = field(
        default=True,
        metadata={
            "description": "Split a comparison or multi-part question into 2-4 parts, "
            "each retrieved and graded on its own."
        },
    )
    sources: str = field(
        default="sql,external",
        metadata={
            "description": "Where the web path looks, in order, stopping once the results "
            "suffice: `sql` (sql_path), `external` (the source named by `external`), or a "
            "source's own name."
        },
    )
    sql_path: Path | None = field(
        default=None,
        metadata={
            "description": "A SQLite database for structured questions (prices, specs, "
            "counts), read-only, SELECT only."
        },
    )
    sql_max_rows: int = field(
        default=20, metadata={"description": "At most this many rows per SQL query."}
    )
    sql_timeout_s: float = field(
        default=5.0, metadata={"description": "Timeout of each SQL query (s)."}
    )

    max_question_chars: int = field(
        default=4000,
        metadata={"description": "Longer questions are refused (bounded work on any input)."},
    )

    # --- refinement ---------------------------------------------------------------
    refine: bool = field(
        default=True, metadata={"description": "Knowledge refinement on (off for ablation)."}
    )
    strip_sentences: int = field(default=2, metadata={"description": "Sentences per strip (1-3)."})
    strip_threshold: float = field(
        default=0.10, metadata={"description": "Strips scoring below this are dropped."}
    )
    max_strips: int = field(default=8, metadata={"description": "At most this many strips kept."})

    # --- confidence: what orders documents and strips, and settles conflicts ----------
    weight_relevance: float = field(
        default=0.6,
        metadata={"description": "Weight of the grader's relevance score in the composite."},
    )
    weight_completeness: float = field(
        default=0.1,
        metadata={"description": "Weight of completeness (share of the question covered)."},
    )
    weight_recency: float = field(
        default=0.2,
        metadata={"description": "Weight of recency (the document's date, decaying)."},
    )
    weight_authority: float = field(
        default=0.1,
        metadata={"description": "Weight of authority (the source's kind, see `authority`)."},
    )
    timely_recency_weight: float = field(
        default=0.5,
        metadata={
            "description": "The recency weight for a time-sensitive question ('latest', "
            "'current', 'as of', a year), when it is higher than weight_recency."
        },
    )
    recency_half_life_days: float = field(
        default=365.0,
        metadata={"description": "Age (days) at which a document's recency halves."},
    )
    authority: dict[str, float | str] = field(
        default_factory=dict,
        metadata={
            "description": "Authority overrides, a JSON object: a kind (library, official, "
            "news, blog, web, forum) to a number, or a source (file, folder/, glob, web "
            "host or URL prefix) to a number or a kind."
        },
    )
    dedup_threshold: float = field(
        default=0.9,
        metadata={
            "description": "Strips whose embeddings' cosine reaches this (and that state "
            "the same numbers and dates) are one fact: only the more confident one is kept."
        },
    )
    conflicts: Literal["auto", "rule", "model", "off"] = field(
        default="auto",
        metadata={
            "description": "Sources that give different values for the question: resolved by "
            "`rule` (values read from the text), `model` (one chat model call, the rule if it "
            "fails), `auto` (model unless chat_model=extractive) or `off`."
        },
    )
    source_priority: Literal["auto", "internal-first", "web-first"] = field(
        default="auto",
        metadata={
            "description": "Ambiguous path: which side leads the context, the library "
            "(`internal-first`) or the web (`web-first`); `auto`: web first for a "
            "time-sensitive question."
        },
    )

    # --- external search ------------------------------------------------------------
    external: str = field(
        default="local",
        metadata={
            "description": "`local` (a second Chroma collection), `tavily`, or `none` "
            "(decline when the library has nothing)."
        },
    )
    external_collection: str = field(
        default="external", metadata={"description": "Collection used by external=local."}
    )
    web_k: int = field(default=5, metadata={"description": "External results per search."})
    tavily_base_url: str | None = field(
        default=None, metadata={"description": "Tavily API base URL (tests point it at loopback)."}
    )
    redact_queries: bool = field(
        default=True,
        metadata={
            "description": "Mask e-mail addresses, phone numbers, keys, tokens, card numbers "
            "and user paths in what leaves the machine: queries to an external search, and "
            "all text sent to `openai:` chat models and embeddings not on loopback (off for "
            "a trusted provider)."
        },
    )
    timeout_s: float = field(
        default=30.0,
        metadata={"description": "Timeout of each external search and Chroma server call (s)."},
    )
    chat_timeout_s: float = field(
        default=180.0,
        metadata={
            "description": "Timeout of each call to an `openai:` chat model (s); long enough "
            "for a small model on a laptop CPU behind an OpenAI-compatible server."
        },
    )
    embeddings_timeout_s: float = field(
        default=60.0,
        metadata={"description": "Timeout of each call to `openai:` embeddings (s)."},
    )

    # --- generation ---------------------------------------------------------------
    verify: bool = field(
        default=True,
        metadata={
            "description": "Check the answer's evidence against the question's years, "
            "dates, versions and names; decline when it speaks of others."
        },
    )
    verify_claims: bool = field(
        default=False,
        metadata={
            "description": "With a language model, also check each answer sentence against "
            "its sources (one judge_model call) and drop those they do not state. Off by "
            "default: the local 1.5B model drops sentences its sources do state."
        },
    )
    near_miss_answers: bool = field(
        default=False,
        metadata={
            "description": "When the evidence answers a neighbouring question (2022 "
            "instead of 2023), say so and answer it instead of declining."
        },
    )
    max_answer_tokens: int = field(
        default=320, metadata={"description": "Upper bound on generated answer tokens."}
    )
    model_cache: Path = field(
        default=Path("~/.cache/crag"),
        metadata={"description": "Where the local GGUF model is assembled once (1.1 GB)."},
    )
    threads: int = field(
        default=0, metadata={"description": "CPU threads for local models (0 = all cores)."}
    )

    # --- answer cache -------------------------------------------------------------------
    cache: bool = field(
        default=True,
        metadata={
            "description": "Answer again from the tenant's cache of confident answers (verdict "
            "`correct`, answer verified) when an earlier question asked the same; `--no-cache` "
            "runs the whole graph and stores nothing."
        },
    )
    cache_threshold: float = field(
        default=0.90,
        metadata={
            "description": "A cached answer serves a question whose embedding has at least this "
            "cosine similarity to the cached one's (and the same years, versions, names and "
            "words, synonyms aside)."
        },
    )
    cache_size: int = field(
        default=1000,
        metadata={"description": "Cached answers kept per tenant; the least recently used go."},
    )
    cache_min_confidence: float = field(
        default=0.0,
        metadata={
            "description": "An answer whose state carries a `confidence` below this is never "
            "cached (answers without one are judged by verdict and verification alone)."
        },
    )

    # --- ingest -----------------------------------------------------------------------
    chunk_size: int = field(default=900, metadata={"description": "Target chunk size (chars)."})
    chunk_overlap: int = field(default=150, metadata={"description": "Chunk overlap (chars)."})

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self), localns={"Path": Path})
        explicit: frozenset[str] = getattr(self, "_explicit", frozenset())
        origins: dict[str, str] = {}
        for f in fields(self):
            if not f.init:
                continue
            if f.name in explicit:
                origins[f.name] = "argument"
                self._set(f.name, getattr(self, f.name), hints[f.name], origins[f.name])
                continue
            raw = os.environ.get(ENV_PREFIX + f.name.upper())
            if raw is not None:
                origins[f.name] = ENV_PREFIX + f.name.upper()
                self._set(f.name, raw, hints[f.name], origins[f.name])
        self.home = Path(self.home).expanduser()
        saved = load_settings(self.home)
        for name, value in saved.items():
            if name not in origins and name != "home":
                origins[name] = str(self.home / SETTINGS_FILE)
                self._set(name, value, hints[name], origins[name])
        self.model_cache = Path(self.model_cache).expanduser()
        object.__setattr__(self, "_origins", origins)
        self.validate()

    def _set(self, name: str, value: Any, annotation: Any, origin: str) -> None:
        """Set a knob from an argument, env var or settings file, typed and checked."""
        try:
            setattr(self, name, _typed(value, annotation))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name}={value!r} (from {origin}): {exc}") from exc

    def origin(self, name: str) -> str:
        """Where a knob's value came from: an argument, an env var, a file, or the default."""
        return getattr(self, "_origins", {}).get(name, "default")

    def validate(self) -> None:
        """Reject contradictory knobs early, naming the knob at fault and its origin."""

        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"{name}={getattr(self, name)!r} (from {self.origin(name)}): {why}")

        for name in (
            "upper",
            "lower",
            "strip_threshold",
            "cascade_low",
            "cascade_high",
            "fast_gap",
            "dedup_threshold",
            *(f"weight_{signal}" for signal in SIGNALS),
            "timely_recency_weight",
            "cache_threshold",
            "cache_min_confidence",
        ):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:  # NaN fails too
                raise bad(name, "must be a number from 0 to 1")
        if not sum(getattr(self, f"weight_{signal}") for signal in SIGNALS) > 0:
            raise bad("weight_relevance", "the confidence weights must not all be 0")
        for name in (
            "timeout_s",
            "chat_timeout_s",
            "embeddings_timeout_s",
            "recency_half_life_days",
            "sql_timeout_s",
        ):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 < value < math.inf:
                raise bad(name, "must be a positive number of seconds")
        for name in (
            "max_question_chars",
            "k",
            "candidates",
            "web_k",
            "max_strips",
            "chunk_size",
            "sql_max_rows",
            "cache_size",
        ):
            if getattr(self, name) < 1:
                raise bad(name, "must be >= 1")
        for name in ("max_answer_tokens", "threads", "chunk_overlap"):
            if getattr(self, name) < 0:
                raise bad(name, "must be >= 0")
        if self.lower > self.upper:
            raise bad("lower", f"must not exceed upper={self.upper}")
        if self.cascade_low > self.cascade_high:
            raise bad("cascade_low", f"must not exceed cascade_high={self.cascade_high}")
        if not [s for s in self.sources.split(",") if s.strip()]:
            raise bad("sources", "must name at least one source, e.g. sql,external")
        if self.sql_path is not None:
            self.sql_path = Path(self.sql_path).expanduser()
        if self.grader_file is not None:
            self.grader_file = Path(self.grader_file).expanduser()
        if not 1 <= self.strip_sentences <= 3:
            raise bad("strip_sentences", "must be 1-3")
        for key, value in self.authority.items():
            if isinstance(value, str) and value not in AUTHORITY_OF_KIND:
                kinds = ", ".join(AUTHORITY_OF_KIND)
                raise bad("authority", f"{key!r}: unknown kind {value!r}; use {kinds} or 0-1")
            if isinstance(value, float) and not 0.0 <= value <= 1.0:
                raise bad("authority", f"{key!r}: must be a number from 0 to 1")
        if not _TENANT_NAME.fullmatch(self.tenant or ""):
            raise bad(
                "tenant",
                "use 1-64 characters from a-z, A-Z, 0-9, '.', '_' and '-', "
                "starting with a letter or digit",
            )
        if self.chunk_overlap >= self.chunk_size:
            raise bad("chunk_overlap", f"must be smaller than chunk_size={self.chunk_size}")

    def with_overrides(self, **overrides: Any) -> Context:
        """A copy with some knobs changed (None values are ignored). Knobs the caller
        never gave are resolved again, so `home=` brings that home's settings.json."""
        given = {n: getattr(self, n) for n in getattr(self, "_explicit", ())}
        return Context(**given | {k: v for k, v in overrides.items() if v is not None})

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


_dataclass_init = Context.__init__


def _recording_init(self: Context, **kwargs: Any) -> None:
    """Remember which knobs the caller gave: an argument wins even when it equals the
    default (`Context(chat_model="local")` under `CRAG_CHAT_MODEL=extractive`)."""
    object.__setattr__(self, "_explicit", frozenset(kwargs))
    _dataclass_init(self, **kwargs)


Context.__init__ = _recording_init  # type: ignore[method-assign]


def context_from(value: Context | dict[str, Any] | None) -> Context:
    """The run's Context from what LangGraph hands a node: the Context itself, a plain
    dict (a server passes JSON), or nothing (a caller gave none: env and defaults)."""
    if value is None:
        return Context()
    if isinstance(value, dict):
        return Context(**value)
    return value
