"""Every knob of a crag run, in small groups: where the library lives, which models and
sources serve it (here), and the knobs of the method itself (`crag.method_knobs`).

`Context` is the graph's `context_schema`: a node reads the group it needs
(`ctx.grading.upper`). Each knob also has a flat name, unique across groups (`upper`,
`cache_threshold`), that `CRAG_<NAME>`, `CRAG_HOME/settings.json`, `--set NAME=VALUE`
and `Context(upper=0.6)` all use. Precedence: arguments (even one equal to the
default), then environment, then settings, then defaults; an error names the knob,
the value and where it came from.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crag.method_knobs import (
    AUTHORITY_OF_KIND,
    SIGNALS,
    Cache,
    Confidence,
    Generation,
    Grading,
    Refinement,
    Retrieval,
)
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


@dataclass
class Store:
    """Where the library lives and how its books are cut into chunks."""

    home: Path = knob(
        Path(".crag"), "Data folder: Chroma index, answer cache, conversations, settings.json."
    )
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
        "Timeout of each try of a call to an `openai:` chat model (s; a failed try is made "
        "once more); long enough for a small model "
        "on a laptop CPU behind an OpenAI-compatible server.",
        check="seconds",
    )
    embeddings_timeout_s: float = knob(
        60.0,
        "Timeout of each try of a call to `openai:` embeddings (s; a failed try is made once "
        "more).",
        check="seconds",
    )

    @property
    def judge(self) -> str:
        """The chat model that judges: documents for a judging grader, an answer's claims
        for `verify_claims`."""
        return self.judge_model or self.chat_model


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
    takes a group as a mapping (what a server sends as JSON) or as its dataclass (the
    knobs it sets away from their defaults)."""

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
            raise bad(
                "lower", f"must not exceed upper={grading.upper} (from {self.origin('upper')})"
            )
        if grading.cascade_low > grading.cascade_high:
            high = f"cascade_high={grading.cascade_high} (from {self.origin('cascade_high')})"
            raise bad("cascade_low", f"must not exceed {high}")
        if not [s for s in search.sources.split(",") if s.strip()]:
            raise bad("sources", "must name at least one source, e.g. sql,external")
        if search.sql_path is not None:
            search.sql_path = Path(search.sql_path).expanduser()
        if grading.grader_file is not None:
            grading.grader_file = Path(grading.grader_file).expanduser()
        if grading.reader_file is not None:
            grading.reader_file = Path(grading.reader_file).expanduser()
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


_IGNORED: set[tuple[str, str]] = set()  # (file, name) pairs already warned of


def _flat(values: dict[str, Any], origin: str, *, strict: bool = True) -> dict[str, Any]:
    """Knobs by flat name from flat names, `group.field` keys and groups (a mapping or the
    group's dataclass); an unknown name is an error (`strict`), or, in a settings file
    that an older crag may have written, ignored with a warning (once per process)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key in GROUPS and isinstance(value, dict | GROUPS[key]):
            if isinstance(value, dict):
                items = list(value.items())
            else:  # a group's dataclass gives the knobs it sets: those away from defaults
                defaults = vars(GROUPS[key]())
                items = [(a, v) for a, v in vars(value).items() if v != defaults.get(a)]
            out |= _flat({f"{key}.{a}": v for a, v in items}, origin, strict=strict)
            continue
        try:
            out[knob_named(key).name] = value
        except ValueError as exc:
            if strict:
                raise ValueError(f"{exc} (from {origin})") from None
            if (origin, key) not in _IGNORED:
                _IGNORED.add((origin, key))
                logging.getLogger(__name__).warning("%s: ignored %s", origin, exc)
    return out


def context_from(value: Context | dict[str, Any] | None) -> Context:
    """The run's Context from what LangGraph hands a node: the Context itself, a plain
    dict (a server passes JSON), or nothing (a caller gave none: env and defaults)."""
    if value is None:
        return Context()
    if isinstance(value, dict):
        return Context(**value)
    return value


def served_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """A graph's context schema as a server reads it: the groups, none required (each has
    its defaults), and every knob by its flat name too, without a default (a knob not
    given keeps the environment's, the settings file's or its own). A server keeps only
    the context keys its schema names: without the flat names, `{"tenant": "acme"}`
    would be dropped and the run would read the default tenant's library."""
    if not schema or "properties" not in schema:
        return schema
    schema = {k: v for k, v in schema.items() if k != "required"}
    defs = schema.get("$defs", {})
    properties = dict(schema["properties"])
    for spec in KNOBS.values():
        group = defs.get(GROUPS[spec.group].__name__, {}).get("properties", {})
        flat = {k: v for k, v in group.get(spec.attr, {}).items() if k != "default"}
        properties.setdefault(spec.name, flat or {"description": spec.description})
    schema["properties"] = properties
    return schema
