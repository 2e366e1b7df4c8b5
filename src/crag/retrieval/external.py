"""External knowledge sources for the web path, chosen by the `external` knob (group `search`).

Each result is its own `Passage` with a URL or file to cite, never one joined blob.
Failures raise `SearchError`; the web_search node records them and the run goes on.
Adding a source is one class here (or in its own module) and one `SOURCES` entry.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from crag.context import Context
from crag.errors import ProviderError, SearchError
from crag.registry import Registry
from crag.retrieval.library import hit_to_passage, retrieve_many
from crag.text import split_date_stamps

if TYPE_CHECKING:
    from crag.state import Origin, Passage


class ExternalSearch(Protocol):
    name: str
    #: Whether queries go to another machine (and so are masked of secrets first).
    leaves_machine: bool

    async def asearch(self, queries: list[str], k: int) -> list[Passage]:
        """Results for the first query (the rewritten one); others may widen recall."""
        ...


class NoSearch:
    """external=none: the library is all there is."""

    name = "none"
    leaves_machine = False

    async def asearch(self, queries: list[str], k: int) -> list[Passage]:
        return []


class TavilySearch:
    name = "tavily"
    leaves_machine = True

    def __init__(self, api_key: str, base_url: str | None, timeout_s: float) -> None:
        self.api_key = api_key
        self.base_url = base_url
        self.timeout_s = timeout_s

    async def asearch(self, queries: list[str], k: int) -> list[Passage]:
        from tavily import AsyncTavilyClient  # only when Tavily is the source

        kwargs = {"api_base_url": self.base_url} if self.base_url else {}
        try:
            async with AsyncTavilyClient(api_key=self.api_key, **kwargs) as client:
                response = await asyncio.wait_for(
                    client.search(queries[0], max_results=k, timeout=self.timeout_s),
                    timeout=self.timeout_s + 1,
                )
        except TimeoutError as exc:
            raise SearchError(f"tavily: no answer within {self.timeout_s:g} s") from exc
        except Exception as exc:  # the client raises its own error types per status
            raise SearchError(f"tavily: {one_line(exc)}") from exc
        results = response.get("results") if isinstance(response, dict) else response
        if results is None:
            results = []  # no results is an answer
        hits = [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []
        if not isinstance(results, list) or (results and not hits):
            got = "no result objects" if isinstance(results, list) else type(results).__name__
            raise SearchError(f"tavily: malformed response (expected a list of results, got {got})")
        passages: list[Passage] = []
        for i, hit in enumerate(hits[:k]):
            url = str(hit.get("url") or "")
            title = str(hit.get("title") or url or f"result {i + 1}")
            passage: Passage = {
                "id": f"web:{url or i}",
                "text": str(hit.get("content") or ""),
                "origin": "external",
                "source": title,
                "title": title,
                "url": url,
                "similarity": _score(hit.get("score")),
            }
            if hit.get("published_date"):  # Tavily's news results carry their date
                passage["published"] = str(hit["published_date"])
            passages.append(passage)
        return [read_result(p) for p in passages if p["text"].strip()]


class CollectionSearch:
    """A Chroma collection as a source: the offline stand-in for the web
    (external=local).

    Queried with each query given (the rewritten one and the question or its parts),
    since an embedding index, unlike a keyword engine, often does better with the
    full question.
    """

    leaves_machine = False

    def __init__(self, ctx: Context, collection: str, origin: Origin, name: str) -> None:
        self.ctx = ctx
        self.collection = collection
        self.origin: Origin = origin
        self.name = name

    def _search(self, queries: list[str], k: int) -> list[Passage]:
        best: dict[str, Passage] = {}
        try:
            found = retrieve_many(
                self.ctx, self.collection, list(dict.fromkeys(q for q in queries if q.strip())), k
            )
        except Exception as exc:
            why = " ".join(str(exc).split())
            raise SearchError(f"{self.name} collection {self.collection!r}: {why}") from exc
        for hits in found:
            for hit in hits:
                passage = hit_to_passage(hit, origin=self.origin)
                if self.origin == "external":
                    passage = read_result(passage)
                known = best.get(passage["id"])
                if known is None or passage.get("similarity", 0) > known.get("similarity", 0):
                    best[passage["id"]] = passage
        ranked = sorted(best.values(), key=lambda p: -p.get("similarity", 0.0))
        return ranked[:k]

    async def asearch(self, queries: list[str], k: int) -> list[Passage]:
        return await asyncio.to_thread(self._search, queries, k)


def _score(value: object) -> float:
    """A result's own relevance score in [0, 1]; anything else counts as 0."""
    try:
        score = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0
    return min(1.0, max(0.0, score)) if math.isfinite(score) else 0.0


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception as `Type: message` on one line (HTTP errors carry a help paragraph)."""
    msg = " ".join(str(exc).split())
    if len(msg) > limit:
        msg = msg[: limit - 3] + "..."
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def read_result(passage: Passage) -> Passage:
    """An external result as crag reads it: the dates that open its snippets become its
    `published` date instead of part of its text."""
    text, dates = split_date_stamps(passage["text"])
    if not dates:
        return passage
    return {**passage, "text": text, "published": passage.get("published") or dates[0]}


SOURCES: Registry[Callable[[Context], ExternalSearch]] = Registry("external source")


@SOURCES.register("local", "a second Chroma collection (external_collection), offline")
def _local(ctx: Context) -> ExternalSearch:
    return CollectionSearch(ctx, ctx.search.external_collection, "external", "local")


def _tavily_key() -> str:
    key = os.environ.get("TAVILY_API_KEY")
    if not key:
        raise ProviderError("external=tavily needs TAVILY_API_KEY in the environment")
    return key


@SOURCES.register("tavily", "Tavily web search (TAVILY_API_KEY)", ready=_tavily_key)
def _tavily(ctx: Context) -> ExternalSearch:
    return TavilySearch(_tavily_key(), ctx.search.tavily_base_url, ctx.search.timeout_s)


@SOURCES.register("none", "no external source: decline when the library has nothing")
def _none(ctx: Context) -> ExternalSearch:
    return NoSearch()


#: Sources of the web path that are not an `external` choice: a database.
FALLBACKS: Registry[Callable[[Context], ExternalSearch]] = Registry("source")


@FALLBACKS.register("sql", "a SQLite database (sql_path) for structured questions")
def _sql(ctx: Context) -> ExternalSearch:
    from crag.retrieval.sql import SqlSearch

    return SqlSearch(ctx)


def source_names(ctx: Context) -> list[str]:
    """The web path's sources in order; `external` is the one `ctx.search.external` names.
    A source that cannot run here (sql with no database) is left out."""
    names = []
    for raw in ctx.search.sources.split(","):
        name = ctx.search.external if raw.strip() == "external" else raw.strip()
        if name not in FALLBACKS and name not in SOURCES:
            known = ", ".join(["external", *FALLBACKS.names(), *SOURCES.names()])
            raise ProviderError(
                f"sources={ctx.search.sources!r}: unknown source {name!r}; use {known}"
            )
        if name == "sql" and ctx.search.sql_path is None:
            continue
        if name not in names:
            names.append(name)
    return names


def _registry(name: str) -> Registry[Callable[[Context], ExternalSearch]]:
    return FALLBACKS if name in FALLBACKS else SOURCES


def make_source(ctx: Context, name: str) -> ExternalSearch:
    return _registry(name)[name](ctx)


def check_sources_ready(ctx: Context) -> None:
    """Raise ProviderError if a source of the web path cannot start (a missing key, or
    no database at sql_path)."""
    for name in source_names(ctx):
        _registry(name).check_ready(name)
        if name == "sql" and ctx.search.sql_path and not ctx.search.sql_path.is_file():
            raise ProviderError(f"sql_path={str(ctx.search.sql_path)!r}: no database there")
