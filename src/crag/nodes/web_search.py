"""The web path: rewrite turns the question into a short search query (the question
itself is never replaced: generate still answers `question`), and web_search asks the
sources of `search.sources` in order (a database, the external source) until every open
target (the question, or the parts the library did not cover) has a result scoring at
or above `upper`. A source that fails is recorded and the next one asked; no failure is
fatal, and each source runs once. What they find is `web_docs`: the library's chunks
and the verdict stay grade's.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from crag import prompts
from crag.context import Context
from crag.errors import ProviderError, SearchError
from crag.grading.constraints import check
from crag.grading.question_form import read
from crag.grading.registry import make_grader
from crag.models.chat import EXTRACTIVE, UNSTREAMED, make_chat_model
from crag.nodes.trail import context_of, note, recorded
from crag.redact import redact, without_masked
from crag.retrieval.external import ExternalSearch, make_source, source_names
from crag.retrieval.library_index import without_boilerplate
from crag.state import Passage, State
from crag.text import content_words, counted, keyword_query

log = logging.getLogger(__name__)


def with_constraints(query: str, question: str, *, names: bool = True) -> str:
    """The query, plus any year, date, version (and, with `names`, specific name) of the
    question it dropped: a search that loses "2023" finds every year's results."""
    reading = read(question)
    asked = list(reading.constraints if names else reading.when)
    missing = [c.value for c in check(asked, [query]).unmet]
    return " ".join([query, *missing]).strip()


def clean_query(raw: str) -> str:
    """First line of the model's reply, without quotes or a 'Query:' label."""
    line = raw.strip().splitlines()[0] if raw.strip() else ""
    if ":" in line[:20]:
        line = line.split(":", 1)[1]
    return line.strip().strip("\"'` ").rstrip(".")


def _forms(text: str) -> set[str]:
    """A text's content words in letters and digits only ("TF-IDF" is "tfidf"), whole
    and by their hyphenated pieces."""
    found = set()
    for word in content_words(text):
        found.add(re.sub(r"[\W_]", "", word))
        found.update(p for p in re.split(r"[-_]", word) if len(p) > 1)
    return found - {""}


def _same_word(a: str, b: str) -> bool:
    """One word in two forms: equal, or a shared stem of five letters or more that
    leaves at most four letters of either ("normal" and "normally", "directed" and
    "director"; not "model" and "modelcheckpointing")."""
    pairs = enumerate(zip(a, b, strict=False))
    shared = next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))
    return a == b or shared >= max(5, len(a) - 4, len(b) - 4)


def of_the_question(query: str, question: str) -> str:
    """The model's query if at least half of its words are the question's, else "".

    A rewrite condenses the question and may add a synonym or two; a query mostly of
    other words is the model's guess at the answer (asked who won in 2021, a small
    model searched for its guess) or words glued into one ("coldstartproblem"), and
    either sends the search away from what was asked. Words the model joined with "_"
    are searched as words, unless the question writes them so.
    """
    query = " ".join(w if w in question else w.replace("_", " ") for w in query.split())
    asked = _forms(question)
    own = _forms(query)
    kept = sum(any(_same_word(w, a) for a in asked) for w in own)
    return query if own and 2 * kept >= len(own) else ""


@recorded
async def rewrite(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    # the query leaves the machine: it is written from the question without its secrets
    outgoing = redact(state["question"]) if ctx.search.redact_queries else None
    question = outgoing.bare if outgoing else state["question"]
    masked = outgoing.removed if outgoing else []

    def sendable(text: str) -> str:  # less the words of a masked secret ("jane.doe")
        return without_masked(text, state["question"]) if outgoing else text

    gaps = [g for g in state.get("missing_terms") or [] if sendable(g)]
    # Of a decomposed question, only the parts the library does not cover are searched.
    open_parts = [p["text"] for p in state.get("parts") or [] if not p["covered"]]
    if open_parts:
        searched = sendable(" ".join(open_parts))
        question = with_constraints(searched, question, names=False)
    # What the library lacks leads the query: the web is there to fill that gap.
    fallback = with_constraints(keyword_query(" ".join([*gaps, question])), question)
    if ctx.models.chat_model == EXTRACTIVE:
        return {"web_query": fallback, "redacted": masked, **note(f"keywords: {fallback}")}
    model = make_chat_model(ctx.models.chat_model, ctx, max_tokens=24)
    try:
        reply = await model.ainvoke(
            [
                SystemMessage(prompts.REWRITE_SYSTEM),
                HumanMessage(
                    prompts.REWRITE_GAP_USER.format(question=question, gaps=", ".join(gaps))
                    if gaps
                    else prompts.REWRITE_USER.format(question=question)
                ),
            ],
            config=UNSTREAMED,
        )
        # the gaps are asked for in their normal form ("beta" for "β"): words of the question
        query = of_the_question(clean_query(str(reply.content)), " ".join([question, *gaps]))
    except Exception as exc:  # a rewrite is an optimisation: never fail the run on it
        log.warning("rewrite failed (%s); using keywords", exc)
        query = ""
    if not 2 <= len(query) <= 200:
        detail = f"keywords (the model gave no usable query of the question's words): {fallback}"
        return {"web_query": fallback, "redacted": masked, **note(detail)}
    query = with_constraints(query, question)
    return {"web_query": query, "redacted": masked, **note(f"query: {query}")}


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
        self.tried.append(f"{source.name}: {counted(len(graded), 'result')}, best {top:.2f}")


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
            source = make_source(ctx, name)  # a missing key or package is the user's to fix:
        except SearchError as exc:  # ProviderError goes up, as a chat model's does
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
