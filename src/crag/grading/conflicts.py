"""Sources that disagree: different values for the one thing a question asks.

A handbook of version 2.4 says 120 requests per minute and the 3.0 changelog says 300;
a forum post says port 8080 and the documentation 7420. Side by side in the context,
they leave the reader (or the model) to pick at random. crag keeps the source with the
higher composite confidence, drops the other, and the answer says so and why.

Only a question that asks for one value (what, which, when, who, how many ...) can have
sources that disagree on it; a question that asks how something changed, or asks two
things, reads several values as its answer. Without a language model, a source's value
is read from its sentences that speak of the question (most of its key terms): the
numbers, years, dates, versions or names the question's kind asks for. Two sources
disagree when each states a value the other does not and they answer with different
ones (the value nearest the question's words): a changelog that says "from 120 to 300"
does not contradict the handbook's 120, nor "USD 8, up from USD 6" a page that says
"USD 8 a month or USD 80 a year". With a language model, one call reads
out each source's answer (`conflicts=model`); the preference is crag's, never the
model's, and a model that fails or times out leaves the decision to the rule.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import HumanMessage, SystemMessage

from crag import prompts
from crag.context import Context
from crag.directives import without_directives
from crag.grading.confidence import Weights, why_preferred
from crag.grading.constraints import stated
from crag.grading.question_form import read
from crag.models.chat import EXTRACTIVE, UNSTREAMED, make_chat_model
from crag.state import Conflict, ConflictValue, Passage, Strip
from crag.text import MONTHS, STOPWORDS, folded_words, normalize, split_sentences, stem, stems

log = logging.getLogger(__name__)


def fact_sentences(question: str, text: str) -> list[str]:
    """The sentences of a text that speak of the question: at least half its key terms."""
    terms = [s for t in read(question).key_terms if (s := stems(t))]
    if not terms:
        return []
    need = math.ceil(len(terms) / 2)
    return [
        sentence
        for sentence in split_sentences(text)
        if sum(t <= stems(sentence) for t in terms) >= need
    ]


_NAME_RUN = re.compile(r"\b[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*")


def names_in(sentence: str, question: str) -> set[str]:
    """Names a sentence gives that the question does not (a capitalised word that
    opens the sentence alone is just its first word)."""
    asked = stems(question)
    found = set()
    for m in _NAME_RUN.finditer(normalize(sentence)):
        run = m.group().split()
        if m.start() == 0 and len(run) == 1:
            continue
        kept = [
            w.lower()
            for w in run
            if w.lower() not in STOPWORDS and w.lower() not in MONTHS and stem(w) not in asked
        ]
        if kept:
            found.add(" ".join(kept))
    return found


def values(sentences: Sequence[str], kind: str, question: str) -> set[str]:
    """The values of the asked kind the sentences state, less those the question states."""
    if kind == "name":
        return {v for s in sentences for v in names_in(s, question)}
    asked = stated(question, kind)
    return {v for s in sentences for v in stated(s, kind)} - asked


def _nearest(sentence: str, found: set[str], wanted: set[str]) -> str:
    """Of the values a sentence states, the one fewest words from a wanted word."""
    words = [w.strip(".,;:()[]\"'").replace(",", "").lower() for w in normalize(sentence).split()]
    near = [i for i, w in enumerate(words) if stems(w) & wanted]

    def distance(value: str) -> int:
        first = value.split()[0]
        at = [i for i, w in enumerate(words) if first in (w, w.rstrip("0").rstrip("."))]
        return min((abs(i - j) for i in at for j in near), default=len(words))

    return min(sorted(found), key=distance)


def main_value(facts: Sequence[str], kind: str, question: str) -> str | None:
    """The value a source gives as its answer: in its sentence that names most of the
    question's key terms, the value standing nearest to them (to the common words
    among them, "port" rather than "Tessaro", where it has some: a number after a name
    is the name's). None when no sentence states one."""
    terms = read(question).key_terms
    keys = [stems(k) for k in terms]
    common = [stems(k) for k in terms if not k[:1].isupper()]
    wanted = set().union(*(common or keys))
    ranked = sorted(facts, key=lambda f: -sum(bool(k) and k <= stems(f) for k in keys))
    stating = [
        (sentence, found) for sentence in ranked if (found := values([sentence], kind, question))
    ]
    if kind == "date":  # "when" is answered by a date, where a source gives one, not a year
        full = [(sentence, {v for v in found if "-" in v}) for sentence, found in stating]
        stating = [(sentence, found) for sentence, found in full if found] or stating
    return _nearest(*stating[0], wanted) if stating else None


@dataclass
class Claimant:
    """One source (file or web page, all its chunks) that speaks of the question."""

    doc: Passage  # its most confident chunk
    doc_ids: list[str]
    strips: list[Strip]  # in reading order
    facts: list[str]  # its sentences that speak of the question
    values: set[str] = field(default_factory=set)
    main: str | None = None  # the value it gives as its answer (`main_value`)
    answer: str = ""  # the value a language model read out

    @property
    def text(self) -> str:
        return " ".join(s["text"] for s in self.strips)

    def evidence(self, question: str, kind: str, by: str) -> list[Strip]:
        """Its strips that state its value: what the context must hold when it wins."""
        if by == "model":
            said = [s for s in self.strips if agree(self.answer, s["text"])]
            if said:
                return said
        return [
            s for s in self.strips if values(fact_sentences(question, s["text"]), kind, question)
        ]

    @property
    def label(self) -> str:
        return self.doc["source"]  # a file, or a web page's title


def source_key(doc: Passage) -> tuple[str, str, str]:
    return doc["origin"], doc["source"], doc.get("url", "")


def claimants(
    question: str, kind: str, strips: Sequence[Strip], docs: Sequence[Passage]
) -> list[Claimant]:
    """The sources among the strips that speak of the question, best first: by
    composite confidence, then by their order in `docs` (the source priority)."""
    rank = {d["id"]: i for i, d in enumerate(docs)}
    by_id = {d["id"]: d for d in docs}
    groups: dict[tuple[str, str, str], list[Strip]] = {}
    for strip in sorted(strips, key=lambda s: s["position"]):
        if (doc := by_id.get(strip["doc_id"])) is not None:
            groups.setdefault(source_key(doc), []).append(strip)
    found = []
    for group in groups.values():
        ids = list(dict.fromkeys(s["doc_id"] for s in group))
        best = max((by_id[i] for i in ids), key=lambda d: (d.get("confidence", 0), -rank[d["id"]]))
        # strip by strip: two strips of a source joined would make one sentence of the
        # end of one and the start of another
        facts = [f for s in group for f in fact_sentences(question, s["text"])]
        if facts:
            said = values(facts, kind, question)
            main = main_value(facts, kind, question)
            found.append(Claimant(best, ids, group, facts, said, main))
    return sorted(found, key=lambda c: (-c.doc.get("confidence", 0.0), rank[c.doc["id"]]))


def _words(value: str) -> str:
    return " " + " ".join(folded_words(value)) + " "


def agree(a: str, b: str) -> bool:
    """Two read-out answers that say the same: one holds the other's words
    ("300" and "300 requests per minute"), not "30" and "300"."""
    wa, wb = _words(a), _words(b)
    return wa.strip() != "" and wb.strip() != "" and (wa in wb or wb in wa)


def settle(
    found: Sequence[Claimant], weights: Weights, by: str
) -> tuple[Conflict | None, set[str], Claimant | None]:
    """The conflict among the sources (the best-ranked one with a value wins), the
    chunks of the sources it overrules, and the winner."""
    if by == "model":
        valued = [c for c in found if c.answer.strip()]
        shown = [c.answer.strip() for c in valued]
    else:
        valued = [c for c in found if c.values]
        shown = [", ".join(sorted(c.values)[:4]) for c in valued]
    if len(valued) < 2:
        return None, set(), None
    winner = valued[0]
    if by == "model":
        losers = [c for c in valued[1:] if not agree(c.answer, winner.answer)]
    else:
        # each states a value the other does not, and they answer with different ones
        # (a source that also names last year's price still answers as the other does)
        losers = [
            c
            for c in valued[1:]
            if c.values - winner.values
            and winner.values - c.values
            and (c.main is None or winner.main is None or c.main != winner.main)
        ]
    if not losers:
        return None, set(), None
    said = dict(zip((id(c) for c in valued), shown, strict=True))
    listed: list[ConflictValue] = [
        {"doc_id": c.doc["id"], "source": c.label, "value": said[id(c)]} for c in [winner, *losers]
    ]
    conflict: Conflict = {
        "values": listed,
        "preferred": winner.doc["id"],
        "reason": why_preferred(winner.doc, losers[0].doc, weights),
        "by": "rule" if by == "rule" else "model",
    }
    return conflict, {i for c in losers for i in c.doc_ids}, winner


def mode(ctx: Context) -> str:
    """`rule`, `model` or `off`: `auto` asks the model when there is one."""
    if ctx.confidence.conflicts == "auto":
        return "rule" if ctx.models.chat_model == EXTRACTIVE else "model"
    return ctx.confidence.conflicts


async def read_out(question: str, found: Sequence[Claimant], ctx: Context) -> None:
    """Each source's answer, read out by the chat model in one call (`chat_timeout_s`);
    where it reads none, the values the rule reads."""
    model = make_chat_model(ctx.models.chat_model, ctx, max_tokens=24 * len(found) + 24)
    tag = prompts.data_tag()
    sources = "\n\n".join(
        prompts.SOURCE_BLOCK.format(
            tag=tag,
            n=n,
            label=without_directives(c.label),
            origin=c.doc["origin"],
            text=c.text[:1500],
        )
        for n, c in enumerate(found, 1)
    )
    messages = [
        SystemMessage(prompts.CONFLICT_SYSTEM.format(tag=tag)),
        HumanMessage(prompts.CONFLICT_USER.format(sources=sources, question=question)),
    ]
    reply = await asyncio.wait_for(
        model.with_structured_output(prompts.SourceValues).ainvoke(messages, config=UNSTREAMED),
        timeout=ctx.models.chat_timeout_s,
    )
    if not isinstance(reply, prompts.SourceValues):
        raise ValueError(f"not the JSON asked for: {reply!r}")
    for item in reply.values:
        if 1 <= item.source <= len(found):
            found[item.source - 1].answer = item.value
    for claimant in found:  # a small model skips sources: the rule reads those
        if not claimant.answer.strip() and claimant.values:
            claimant.answer = " ".join(sorted(claimant.values))


@dataclass
class Resolution:
    conflicts: list[Conflict] = field(default_factory=list)
    dropped: set[str] = field(default_factory=set)  # chunks of overruled sources
    evidence: list[Strip] = field(default_factory=list)  # the preferred source's value
    detail: str = ""  # how it was checked, when not as asked

    @property
    def said(self) -> str:
        """The path's words on it: each conflict and how it was settled."""
        lines = [self.detail.removesuffix(": ")] if self.detail and not self.conflicts else []
        for conflict in self.conflicts:
            values = conflict["values"]
            winner = next(v for v in values if v["doc_id"] == conflict["preferred"])
            others = "; ".join(f"{v['source']}: {v['value']}" for v in values if v is not winner)
            lines.append(
                f"{self.detail}sources disagree, preferred {winner['source']}: "
                f"{winner['value']} over {others} ({conflict['reason']})"
            )
        return "; ".join(lines)


async def resolve(
    question: str,
    strips: Sequence[Strip],
    docs: Sequence[Passage],
    ctx: Context,
    weights: Weights,
) -> Resolution:
    """Settle what the sources disagree on. `strips`: every strip of the documents (a
    document graded relevant may state its value in a strip that scored low); `docs`
    rated and in priority order."""
    how, kind = mode(ctx), read(question).slot
    if how == "off" or kind is None:
        return Resolution()
    found = claimants(question, kind, strips, docs)
    if len(found) < 2:
        return Resolution()
    failed = ""
    if how == "model":
        try:
            await read_out(question, found, ctx)
        except Exception as exc:  # timeout, server down, unreadable reply: the rule decides
            log.warning("conflict check by the chat model failed (%s); using the rule", exc)
            failed = f"conflict check by the model failed ({type(exc).__name__}), by rule: "
            how = "rule"
    conflict, dropped, winner = settle(found, weights, how)
    if conflict is None or winner is None:
        return Resolution(detail=failed)
    return Resolution([conflict], dropped, winner.evidence(question, kind, how), failed)


def disagreement(conflict: Conflict, number_of: Callable[[str], int | None]) -> str:
    """The answer's sentence on a conflict: which source crag preferred, and why.
    `number_of` gives a document's citation number, if it is cited."""
    by_id = {v["doc_id"]: v for v in conflict["values"]}
    winner = by_id[conflict["preferred"]]
    n = number_of(winner["doc_id"])
    others = [v["source"] for v in conflict["values"] if v["doc_id"] != conflict["preferred"]]
    cite = f" [{n}]" if n is not None else ""
    return (
        f"Note: the sources disagree on this; crag preferred {winner['source']}{cite} "
        f"over {', '.join(others)}, because {conflict['reason']}."
    )
