"""grade: score the retrieved chunks, route the question, and decide the CRAG verdict.

A simple question whose best chunk clearly wins takes the fast path (that chunk
alone). A question of several parts (`split`, with each part's own chunks from
`retrieve`) has each part sent to `grade_part` to be graded on its own, and grade
decides when they are back; the verdict says how many parts the library covers.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Send

from crag.context import Context
from crag.errors import ProviderError
from crag.grading.constraints import Constraint, check
from crag.grading.coverage import coverage_gaps
from crag.grading.decompose import Split
from crag.grading.question_form import read
from crag.grading.registry import make_grader, uses_llm, without_llm
from crag.grading.verdict import complexity, decide, fast_winner
from crag.nodes.retrieve import split_of
from crag.nodes.trail import context_of, note, recorded
from crag.state import Grades, Part, PartGrade, PartScores, PartTask, Passage, State
from crag.text import times_named


async def scored_by(ctx: Context, question: str, texts: list[str]) -> tuple[list[float], str]:
    """The grader's scores and its name. An LLM judge that gives no usable answer at
    all (its server is down) is replaced by the built-in grader, and the name says so:
    a neutral score for every document would decline what the library answers."""
    grader = make_grader(ctx, library=True)
    try:
        return await grader.ascore(question, texts), grader.name
    except ProviderError as exc:
        if not uses_llm(ctx):
            raise
        stand_in = make_grader(without_llm(ctx), library=True)
        scores = await stand_in.ascore(question, texts)
        return scores, f"{stand_in.name} ({exc})"


def pooled(docs: list[Passage], by_part: list[Passage]) -> list[Passage]:
    """The documents, then each part's own retrieval that they do not hold yet."""
    seen = {d["id"] for d in docs}
    pool = list(docs)
    for passage in by_part:
        if passage["id"] not in seen:
            seen.add(passage["id"])
            pool.append(passage)
    return pool


@recorded
async def grade_part(task: PartTask, runtime: Runtime[Context]) -> dict[str, Any]:
    """One part of a question of several, graded against every document of the pool.
    The part is explained by a document that names its subject (of a comparison) more
    than once and meets its years and versions."""
    ctx = context_of(runtime)
    texts, subject = task["texts"], task["subject"]
    scores, grader = await scored_by(ctx, task["text"], texts)
    # a document that explains a thing names it more than once; one that names it
    # once only mentions it in passing (a chapter on batch norm, of layer norm)
    # and a chunk about another year or version does not cover a part about this one
    asked = list(read(task["text"]).when)
    explains = [
        s
        for s, t in zip(scores, texts, strict=True)
        if (not subject or times_named(subject, t) > 1) and check(asked, [t]).holds
    ]
    found = PartGrade(
        text=task["text"],
        top=float(max(scores, default=0.0)),
        explains=float(max(explains, default=0.0)),
    )
    scored = PartScores(index=task["index"], grade=found, scores=scores, grader=grader)
    detail = f"{task['text']!r}: best {found['top']:.2f}, explained {found['explains']:.2f}"
    return {"part_grades": [scored], **note(detail)}


def part_sends(state: State) -> list[Send]:
    """A `grade_part` run for each part of a question of several that grade sent out
    and has not had back yet ([] otherwise)."""
    if state.get("part_grades"):
        return []
    return [Send("grade_part", task) for task in state.get("part_tasks") or []]


def _label(c: Constraint) -> str:
    return f"{c.kind} {c.value}" if c.kind == "version" else c.value


def meets(asked: list[Constraint], texts: list[str]) -> list[list[str]]:
    """Per text, which of the question's years, dates and versions it meets."""
    return [[_label(c) for c in check(asked, [t]).met] if asked else [] for t in texts]


@dataclass
class Grading:
    """A question graded: the documents (the first retrieval, then each part's) and
    what the grader found, before any threshold."""

    docs: list[Passage]
    grades: Grades
    grader: str
    split: Split
    reasons: list[str]  # why the question is complex ([] for a simple one)
    pending: bool = False  # its parts are still to be graded, each by grade_part


def fast_gap(ctx: Context) -> float | None:
    """The fast path's gap, None when it is off."""
    return ctx.grading.fast_gap if ctx.grading.fast_path else None


def best_k(scores: list[float], k: int) -> list[int]:
    """Indices of the k best scores, best first (retrieval order breaks ties)."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]


async def grading(
    ctx: Context, question: str, candidates: list[Passage], split: Split, by_part: list[Passage]
) -> Grading:
    """Score every candidate, keep the best `k`, route and grade. A question the fast
    path takes at the context's thresholds gets no part grading and no LLM judge: that
    is what it spares (so with an LLM grader its grades hold only the cheap scores)."""
    reasons = complexity(question, split.parts)
    # the fast check uses the cheap grader: a clear winner spares the LLM judge
    cheap = without_llm(ctx)
    (every, name), never = await asyncio.gather(
        scored_by(cheap, question, [d["text"] for d in candidates]),
        coverage_gaps(question, ctx),
    )
    kept = best_k(every, ctx.retrieval.k)
    docs = [candidates[i] for i in kept]
    first = [every[i] for i in kept]
    texts = [d["text"] for d in docs]
    # A name the library never writes is, in a one-part question, the thing asked
    # about; a year, version or number it never writes only constrains a thing it may
    # know (the 2.4 limits for a question on version 3), and a question of several
    # parts may have others the library answers.
    one_part = not split.parts and not read(question).parts
    asked = list(read(question).when) if ctx.grading.coverage_check else []
    grades = Grades(
        scores=[float(s) for s in first],
        first=[float(s) for s in first],
        simple=not reasons and not never,
        parts=[],
        asked=[_label(c) for c in asked],
        meets=meets(asked, texts),
        never=list(never),
        unknown=[t for t in never if not any(ch.isdigit() for ch in t)] if one_part else [],
    )
    if fast_winner(grades, ctx.grading.upper, fast_gap(ctx)) is not None:
        return Grading(docs, grades, name, split, reasons)
    if len(split.parts) >= 2:  # each part graded on its own: the whole question is not
        pool = pooled(docs, by_part)
        # the pool starts with the first retrieval, whose checks are done
        added = [d["text"] for d in pool[len(docs) :]]
        grades["meets"] = [*grades["meets"], *meets(asked, added)]
        return Grading(pool, grades, name, split, reasons, pending=True)
    if cheap is not ctx:  # no clear winner: now the LLM judge grades
        scores, name = await scored_by(ctx, question, texts)
        grades = {**grades, "scores": [float(s) for s in scores]}
    return Grading(docs, grades, name, split, reasons)


def sent(graded: Grading) -> dict[str, Any]:
    """The pool of a question of several parts, before its parts are graded: one
    `grade_part` run for each, then grade again, to decide."""
    texts = [d["text"] for d in graded.docs]
    split = graded.split
    tasks = [
        PartTask(index=i, text=part, subject=subject, texts=texts)
        for i, (part, subject) in enumerate(zip(split.parts, split.subjects, strict=True))
    ]
    detail = f"{len(tasks)} parts (split by {split.how}), each graded on its own"
    return {"docs": graded.docs, "grades": graded.grades, "part_tasks": tasks, **note(detail)}


def joined(state: State, returned: list[PartScores]) -> Grading:
    """The question graded from its parts' grades: a document's score is its best
    part's."""
    rows = sorted(returned, key=lambda r: r["index"])
    best = [max(column) for column in zip(*(r["scores"] for r in rows), strict=True)]
    grades: Grades = {
        **state["grades"],
        "scores": [float(s) for s in best],
        "parts": [r["grade"] for r in rows],
    }
    split = split_of(state)
    reasons = complexity(state["question"], split.parts)
    return Grading(state.get("docs") or [], grades, rows[0]["grader"], split, reasons)


@recorded
async def grade(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    if returned := state.get("part_grades"):
        graded = joined(state, returned)
    else:
        graded = await grading(
            ctx,
            state["question"],
            state.get("retrieved") or [],
            split_of(state),
            state.get("part_retrieved") or [],
        )
    if graded.pending:
        return sent(graded)
    grades = graded.grades
    decision = decide(grades, ctx.grading.upper, ctx.grading.lower, fast_gap(ctx))
    scores = grades["scores"]
    scored = [Passage(**d, score=round(s, 4)) for d, s in zip(graded.docs, scores, strict=True)]
    parts = [
        Part(text=p["text"], score=round(p["top"], 4), covered=covered)
        for p, covered in zip(grades["parts"], decision.covered, strict=True)
    ]
    if decision.fast:
        winner = decision.good[0]
        detail = (
            f"correct by {graded.grader}, fast path: the best chunk scores "
            f"{scores[winner]:.2f}, at least {ctx.grading.fast_gap:g} ahead of the next"
        )
    else:
        detail = f"{decision.verdict} by {graded.grader}: " + ", ".join(f"{s:.2f}" for s in scores)
        if graded.reasons:
            detail += f"; full path ({', '.join(graded.reasons)})"
        if parts:
            done = sum(p["covered"] for p in parts)
            detail += f"; {done} of {len(parts)} parts covered (split by {graded.split.how})"
        if never := grades["never"]:
            detail += f"; the library never mentions {', '.join(never)}"
            detail += ", what the question asks about" if grades["unknown"] else ""
        if decision.other:
            detail += f"; no relevant chunk speaks of {', '.join(decision.other)}"
    return {
        "docs": scored,
        "scores": [round(s, 4) for s in scores],
        "grader": graded.grader,
        "grades": grades,
        "route": "fast" if decision.fast else "full",
        "parts": parts,
        "verdict": decision.verdict,
        "good_docs": [scored[i] for i in decision.good],
        "missing_terms": decision.missing,
        **note(detail),
    }
