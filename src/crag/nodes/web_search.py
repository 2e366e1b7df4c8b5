"""web_search: the correction cascade. The sources of `Context.sources` are asked in
order (the library again with a reformulated query, a database, the external
source), cheapest first, until every open target (the question, or the parts the
library did not cover) has a result scoring at or above `upper`. A source that fails
is recorded and the next one asked; no failure is fatal, and no loop can cycle: each
source runs at most `max_retries` (library) or once (the others).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from langgraph.runtime import Runtime

from crag.context import Context
from crag.errors import ProviderError, SearchError
from crag.grading.constraints import check, when
from crag.grading.coverage import missing_terms, without_boilerplate
from crag.grading.queries import reformulations
from crag.grading.registry import make_grader
from crag.grading.route import structured
from crag.nodes.trail import context_of, note, recorded
from crag.redact import redact, without_masked
from crag.retrieval.external import ExternalSearch, make_source, source_names
from crag.state import Passage, State, Verdict


@dataclass
class Search:
    """What the cascade has found so far, for the targets it must cover."""

    ctx: Context
    targets: list[str]
    seen: set[str]
    # The first retrieval: the library's new chunks are graded in one batch with it, as
    # the grader's features compare each chunk with the others of its question (a few
    # new chunks alone are no batch). External results come as a batch of their own.
    first: list[str] = field(default_factory=list)
    best: dict[str, float] = field(default_factory=dict)
    library: list[Passage] = field(default_factory=list)
    external: list[Passage] = field(default_factory=list)
    tried: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return all(self.best.get(t, 0.0) >= self.ctx.upper for t in self.targets)

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
        library = source.name == "library"
        grader = make_grader(self.ctx, library=library)
        batch = [*self.first, *texts] if library else texts
        per_target = [(await grader.ascore(t, batch))[-len(texts) :] for t in self.targets]
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
            asked = when(target)
            for doc, score in zip(docs, scores, strict=True):
                if score >= self.best.get(target, 0.0) and check(asked, [doc["text"]]).holds:
                    self.best[target] = score
        (self.library if library else self.external).extend(graded)
        top = max((d["score"] for d in graded), default=0.0)
        self.tried.append(f"{source.name}: {len(graded)} results, best {top:.2f}")


def plan(ctx: Context, state: State, name: str, targets: list[str]) -> tuple[list[list[str]], str]:
    """The searches a source gets, or why it gets none: the library one per
    reformulation (at most `max_retries`), a database one for a structured question,
    the others one."""
    question = state["question"]
    query = state.get("web_query") or question
    if name == "library":
        # what the library never names, no new query of it can find
        if unknown := missing_terms(ctx, ctx.collection, state.get("missing_terms") or []):
            return [], f"library: skipped (never names {', '.join(unknown)})"
        tried = [question, *(p["text"] for p in state.get("parts") or [])]
        queries = reformulations(ctx, question, query, targets, tried)[: ctx.max_retries]
        # each retry also looks deeper for the targets: the chunks ranked just below the
        # first k, which the grader may rank above those retrieved
        return [[q, *targets] for q in queries], "library: skipped (no new query)"
    if name == "sql":
        if not any(structured(t) for t in [question, *targets]):
            return [], "sql: skipped (not a structured question)"
        return [[targets[0]]], ""
    return [[query, *targets]], ""


@recorded
async def web_search(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    open_parts = [p["text"] for p in state.get("parts") or [] if not p["covered"]]
    docs = state.get("docs") or []
    search = Search(
        ctx, open_parts or [state["question"]], {d["id"] for d in docs}, [d["text"] for d in docs]
    )
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
            if getattr(source, "leaves_machine", True) and ctx.redact_queries:
                cleaned = [redact(without_masked(q, state["question"])) for q in queries]
                queries = [c.text for c in cleaned]
                masked = list(dict.fromkeys([*masked, *(k for c in cleaned for k in c.removed)]))
            try:
                # the library is searched deeper than the first retrieval went
                await search.ask(source, queries, ctx.k * 3 if name == "library" else ctx.web_k)
            except Exception as exc:  # ungraded results must not reach the answer
                search.errors.append(
                    f"grading the results of {name} failed: {type(exc).__name__}: {exc}"
                )
            if search.done:
                break
    return outcome(ctx, state, search, masked)


def outcome(ctx: Context, state: State, search: Search, masked: list[str]) -> dict[str, Any]:
    """The state update: library results join the good documents; when they cover
    every target before an external source was asked, the verdict is corrected."""
    verdict: Verdict = state["verdict"]
    found = [d for d in search.library if d["score"] >= ctx.lower]
    good = [*(state.get("good_docs") or []), *found]
    asked_outside = any(not t.startswith("library") and "skipped" not in t for t in search.tried)
    corrected = ""
    if found and search.done and not asked_outside:
        verdict, corrected = "correct", "; verdict corrected to correct by the library"
    elif found and verdict == "incorrect":
        verdict, corrected = "ambiguous", "; verdict corrected to ambiguous by the library"
    detail = "; ".join(search.tried) or "no source to ask"
    if masked:
        detail += f"; masked in the query: {', '.join(masked)}"
    if search.errors:
        detail += f"; failed: {'; '.join(search.errors)}"
    docs = [*state["docs"], *search.library]  # all the library chunks the run has seen
    return {
        "docs": docs,
        "scores": [d.get("score", 0.0) for d in docs],
        "verdict": verdict,
        "good_docs": good,
        "web_docs": search.external,
        "web_error": "; ".join(search.errors),
        "searched": search.tried,
        "redacted": masked,
        **note(detail + corrected),
    }
