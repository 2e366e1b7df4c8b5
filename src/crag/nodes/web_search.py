"""web_search: the sources of `search.sources` are asked in order (a database, the
external source), until every open target (the question, or the parts the library
did not cover) has a result scoring at or above `upper`. A source that fails is
recorded and the next one asked; no failure is fatal, and each source runs once.
What they find is `web_docs`: the library's chunks and the verdict stay grade's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from langgraph.runtime import Runtime

from crag.context import Context
from crag.errors import ProviderError, SearchError
from crag.grading.constraints import check
from crag.grading.question_form import read
from crag.grading.registry import make_grader
from crag.nodes.trail import context_of, note, recorded
from crag.redact import redact, without_masked
from crag.retrieval.external import ExternalSearch, make_source, source_names
from crag.retrieval.library_index import without_boilerplate
from crag.state import Passage, State


@dataclass
class Search:
    """What the web path has found so far, for the targets it must cover."""

    ctx: Context
    targets: list[str]
    seen: set[str]
    best: dict[str, float] = field(default_factory=dict)
    external: list[Passage] = field(default_factory=list)
    tried: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return all(self.best.get(t, 0.0) >= self.ctx.grading.upper for t in self.targets)

    async def ask(self, source: ExternalSearch, queries: list[str], k: int) -> None:
        """One search of one source: results graded against each target."""
        try:
            docs = await source.asearch(queries, k)
        except (SearchError, ProviderError) as exc:
            self.errors.append(str(exc))
            self.tried.append(f"{source.name}: failed")
            return
        docs = [d for d in docs if d["id"] not in self.seen]
        self.seen.update(d["id"] for d in docs)
        if collection := getattr(source, "collection", None):  # a library of documents
            docs, _ = await asyncio.to_thread(without_boilerplate, self.ctx, collection, docs)
        if not docs:
            self.tried.append(f"{source.name}: nothing new")
            return
        texts = [d["text"] for d in docs]
        grader = make_grader(self.ctx, library=False)
        per_target = [await grader.ascore(t, texts) for t in self.targets]
        if getattr(source, "self_scored", False):  # e.g. database rows
            per_target = [
                [max(g, d.get("similarity", 0.0)) for g, d in zip(scores, docs, strict=True)]
                for scores in per_target
            ]
        graded = [
            Passage(**d, score=round(max(column), 4))
            for d, column in zip(docs, zip(*per_target, strict=True), strict=True)
        ]
        for target, scores in zip(self.targets, per_target, strict=True):
            # a result about another year or version does not close a target
            asked = list(read(target).when)
            for doc, score in zip(docs, scores, strict=True):
                if score >= self.best.get(target, 0.0) and check(asked, [doc["text"]]).holds:
                    self.best[target] = score
        self.external.extend(graded)
        top = max((d["score"] for d in graded), default=0.0)
        self.tried.append(f"{source.name}: {len(graded)} results, best {top:.2f}")


def plan(ctx: Context, state: State, name: str, targets: list[str]) -> tuple[list[list[str]], str]:
    """The searches a source gets, or why it gets none: a database one for a structured
    question, the others one."""
    if name == "sql":
        if not any(read(t).structured for t in [state["question"], *targets]):
            return [], "sql: skipped (not a structured question)"
        return [[targets[0]]], ""
    return [[state.get("web_query") or state["question"], *targets]], ""


@recorded
async def web_search(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    open_parts = [p["text"] for p in state.get("parts") or [] if not p["covered"]]
    docs = state.get("docs") or []
    search = Search(ctx, open_parts or [state["question"]], {d["id"] for d in docs})
    masked = list(state.get("redacted") or [])  # what rewrite already masked
    try:
        names = source_names(ctx)
    except ProviderError as exc:
        return {"web_docs": [], "web_error": str(exc), "redacted": masked, **note(str(exc))}
    for name in names:
        if search.done:
            break
        try:
            source = make_source(ctx, name)
        except (SearchError, ProviderError) as exc:
            search.errors.append(str(exc))
            continue
        searches, why_not = plan(ctx, state, name, search.targets)
        if not searches:
            search.tried.append(why_not)
        for queries in searches:
            # secrets stay on this machine (a source that does not say where it goes: masked)
            if getattr(source, "leaves_machine", True) and ctx.search.redact_queries:
                cleaned = [redact(without_masked(q, state["question"])) for q in queries]
                queries = [c.text for c in cleaned]
                masked = list(dict.fromkeys([*masked, *(k for c in cleaned for k in c.removed)]))
            try:
                await search.ask(source, queries, ctx.search.web_k)
            except Exception as exc:  # ungraded results must not reach the answer
                search.errors.append(
                    f"grading the results of {name} failed: {type(exc).__name__}: {exc}"
                )
            if search.done:
                break
    return outcome(ctx, state, search, masked)


def outcome(ctx: Context, state: State, search: Search, masked: list[str]) -> dict[str, Any]:
    """The state update: what the sources found, and what was tried."""
    detail = "; ".join(search.tried) or "no source to ask"
    if masked:
        detail += f"; masked in the query: {', '.join(masked)}"
    if search.errors:
        detail += f"; failed: {'; '.join(search.errors)}"
    return {
        "web_docs": search.external,
        "web_error": "; ".join(search.errors),
        "searched": search.tried,
        "redacted": masked,
        **note(detail),
    }
