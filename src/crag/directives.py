"""Orders to a language model hidden in source text (prompt injection), found and
dropped before any model sees the text.

Small local models obey orders even inside clearly delimited data, so every model
that reads a source reads `without_directives(text)`. A classifier would need a
model that is not available offline; instead, rules of two kinds, each of which
holds for any library because books inform a reader and never address a model:

- who is addressed: a language model ("Note to the AI:", "Dear assistant,", "If you
  are an LLM", "IMPORTANT SYSTEM NOTICE:", chat-template tokens such as [INST]);
- what is ordered, in the imperative: override what came before ("ignore the
  previous instructions", "disregard the question"), shape the answer ("reply only
  with the word X", "end every answer with X"), change persona ("you are now DAN",
  "reveal your system prompt").

Ordinary imperatives ("Note that ...", "Consider ...", "Ignore the bias term") give
none of these orders, and third-person mentions ("we ignore", "the model should")
are not imperatives. The lexicon covers English, German, Spanish, French, Italian,
Portuguese and Dutch. An address with nothing else in its sentence ("Note for the
AI.") takes the next sentence with it, and a dropped sentence takes the next one
when that one gives an order too, so an order split over two sentences goes whole.

Text is matched in a folded copy of the same length (accents, full-width letters,
look-alike letters and curly quotes made plain), one unit per line: sentences, code
lines, lines that open with a role marker or a comment. Every gap in a pattern is
bounded, and each pattern runs once over the units that hold one of its words, so
the work is linear in the text.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate
from operator import itemgetter

from crag.directive_lexicon import IMPERATIVE_BEFORE, OPENER_ENDS, OPENING
from crag.directive_rules import (
    ANCHORS_OF,
    ANCHORS_OF_MARK,
    INVISIBLE,
    MARKER_RULE,
    NAMED_RULE,
    ORDER_RULE,
    RULES,
    TRIGGER,
    WEAK_ADDRESSES,
    Rule,
    layout,
)


def _lines(text: str) -> list[str]:
    """The units of a layout, each with its line break (the fold left only "\n")."""
    lines = text.splitlines(keepends=True)
    if len(lines) != text.count("\n") + (not text.endswith("\n")):  # never, but be exact
        *most, last = text.split("\n")
        lines = [line + "\n" for line in most] + [last]
    return [line for line in lines if line] or [""]


class _Laid:
    """A text laid out for matching: folded and cased (`laid`), lower-cased (`low`), with
    where each unit starts."""

    def __init__(self, text: str) -> None:
        self.text = INVISIBLE.sub("", text)
        self.laid = layout(self.text)
        self.low = self.laid.lower()  # as long as `laid`: the fold made "İ" an "I"
        self.lines, self.cased_lines = _lines(self.low), _lines(self.laid)
        self.starts = list(accumulate(map(len, self.lines), initial=0))[:-1]

    def end(self, unit: int) -> int:
        return self.starts[unit + 1] if unit + 1 < len(self.starts) else len(self.laid)

    def imperative_at(self, pos: int, unit: int) -> bool:
        """Whether an order's verb may stand at `pos`: a unit's opening, or after a colon,
        a comma, "and", "please", "you must", "the assistant must" ..."""
        start = max(self.starts[unit], pos - 60)
        window = self.low[start:pos]
        if start == self.starts[unit] and OPENING.match(window):
            return True
        tail = window.rstrip(" ")
        last = tail[tail.rfind(" ") + 1 :].lstrip("\"'(")
        if last and (last[-1].isalnum() or last[-1] == "'") and last not in OPENER_ENDS:
            return False  # the common case, decided without the pattern
        return IMPERATIVE_BEFORE.search(window) is not None

    def holds(self, rule: Rule, start: int, end: int, unit: int) -> bool:
        """Whether a match of `rule` at [start, end) in `unit` is an order: at an order's
        place, with the words it needs near it and something to repeat."""
        if rule.imperative and not self.imperative_at(start, unit):
            return False
        first, last = self.starts[unit], self.end(unit)
        for near in rule.near:
            lo, hi = max(first, start - near.before), min(last, end + near.after)
            spots = near.pattern.finditer(self.low, lo, hi)
            if not any(not near.imperative or self.imperative_at(m.start(), unit) for m in spots):
                return False
        if rule.payload is not None:
            lo = end if rule.payload_before is None else max(first, start - rule.payload_before)
            return rule.payload.search(self.laid, lo, min(last, end + 45)) is not None
        return True

    def ordering(self, units: set[int]) -> set[int]:
        """Those of `units` that give an order (at their opening, or announce the answer)."""
        view = _View(self, sorted(units), cased=True)
        return {unit for unit, _ in view.matches(ORDER_RULE)}

    def ends_soon(self, unit: int, at: int) -> bool:
        """Whether the unit says (next to) nothing after `at`: an address alone."""
        return len(re.findall(r"\w+", self.laid[at : min(self.end(unit), at + 200)])) <= 4

    def next_unit(self, unit: int) -> int | None:
        nxt = unit + 1
        while nxt < len(self.lines) and not self.lines[nxt].strip():
            nxt += 1
        return nxt if nxt < len(self.lines) else None

    def anchored(self) -> dict[str, set[int]]:
        """Anchor -> the units that hold one of its words ("payload": something to repeat)."""
        where: dict[tuple[str | None, str], list[int]] = {}
        for mark, word, pos in [
            (m.lastgroup, m.group(), m.start()) for m in TRIGGER.finditer(self.low)
        ]:
            where.setdefault((mark, word), []).append(pos)
        units: dict[str, set[int]] = {}
        starts = self.starts
        for (mark, word), found in where.items():
            held = {bisect_right(starts, pos) - 1 for pos in found}
            if mark == "word":
                anchors = ANCHORS_OF[" ".join(word.split())]
            else:
                anchors = ANCHORS_OF_MARK[mark or ""]
            for anchor in anchors:
                units.setdefault(anchor, set()).update(held)
        asking = sorted(set().union(*(units.get(a, ()) for a in ("only", "reply", "answers"))))
        named = _View(self, asking).matches(NAMED_RULE)
        capitals = _View(self, asking, cased=True).matches(MARKER_RULE)
        units["payload"] = {unit for unit, _ in (*named, *capitals)}
        return units

    def dropped(self, *, everywhere: bool = False) -> dict[int, str]:
        """Unit -> the rule that drops it (`everywhere`: search every unit, for tests)."""
        dropped: dict[int, str] = {}
        openers: set[int] = set()  # an address alone: its message is the next unit
        anchored = {} if everywhere else self.anchored()
        every = range(len(self.lines))
        views: dict[tuple[str, ...], tuple[int, _View]] = {}  # kept while nothing is dropped
        for rule in (*RULES, *WEAK_ADDRESSES):
            seen, view = views.get(rule.anchors, (-1, None))
            if view is None or seen != len(dropped):
                if everywhere:
                    units = [u for u in every if u not in dropped]
                else:
                    held = [
                        set().union(*(anchored.get(a, ()) for a in n.split("|")))
                        for n in rule.anchors
                    ]
                    units = sorted(set.intersection(*held).difference(dropped))
                view = _View(self, units)
                views[rule.anchors] = (len(dropped), view)
            for unit, at in view.matches(rule):
                dropped.setdefault(unit, rule.name)
                if rule.address and self.ends_soon(unit, at):
                    openers.add(unit)
        # the sentence after an address alone, and after an order when it orders too
        todo = {*dropped, *openers}
        while todo:
            after = {
                u: n for u in todo if (n := self.next_unit(u)) is not None and n not in dropped
            }
            ordering = self.ordering({n for u, n in after.items() if u not in openers})
            todo = set()
            for unit, nxt in sorted(after.items()):
                if unit in openers:
                    dropped[nxt] = "message after an address"
                elif nxt in ordering:
                    dropped[nxt] = "order continued"
                    todo.add(nxt)
            openers = set()
        return dropped


class _View:
    """Some units of a text, joined: what the rules search."""

    def __init__(self, laid: _Laid, units: list[int], *, cased: bool = False) -> None:
        self.laid = laid
        self.units = units
        source = laid.cased_lines if cased else laid.lines
        lines: tuple[str, ...] = ()
        if len(units) == 1:
            lines = (source[units[0]],)
        elif units:
            lines = itemgetter(*units)(source)
        self.text = "".join(lines)  # each line keeps its break but the text's last
        self.offsets = list(accumulate(map(len, lines), initial=0))

    def matches(self, rule: Rule) -> list[tuple[int, int]]:
        """(unit, where the match ends in the text) for each unit `rule` holds in."""
        if not self.units:
            return []
        laid, offsets, units = self.laid, self.offsets, self.units
        if not rule.imperative and not rule.near and rule.payload is None:
            first: dict[int, int] = {}
            for hit in rule.pattern.finditer(self.text):
                first.setdefault(bisect_right(offsets, hit.start()) - 1, hit.end())
            return [
                (units[k], end + laid.starts[units[k]] - offsets[k]) for k, end in first.items()
            ]
        found, pos = [], 0
        while (m := rule.pattern.search(self.text, pos)) is not None:
            k = bisect_right(offsets, m.start()) - 1
            unit, shift = units[k], laid.starts[units[k]] - offsets[k]
            start, end = m.start() + shift, m.end() + shift
            if not laid.holds(rule, start, end, unit):
                pos = m.start() + 1  # a later verb inside this match may still give an order
                continue
            found.append((unit, end))
            pos = offsets[k + 1] if k + 1 < len(offsets) else len(self.text)
        return found


@dataclass(frozen=True)
class Directive:
    """A part of a source dropped as an order to the model, and the rule that found it."""

    text: str
    rule: str


def find_directives(text: str) -> list[Directive]:
    """The parts of `text` that give orders to a language model, in reading order."""
    laid = _Laid(text)
    dropped = laid.dropped()
    return [
        Directive(laid.text[laid.starts[u] : laid.end(u)].strip(), dropped[u])
        for u in sorted(dropped)
    ]


def is_directive(sentence: str) -> bool:
    """True for a sentence that gives orders to a language model."""
    return bool(find_directives(sentence))


def without_directives(text: str) -> str:
    """`text` without the parts that give orders to a language model: what every model
    that reads a source is given, and what an extractive answer may quote."""
    laid = _Laid(text)
    dropped = laid.dropped()
    if not dropped:
        return laid.text
    kept = (laid.text[laid.starts[u] : laid.end(u)] for u in range(len(laid.lines)))
    return "".join(part for u, part in enumerate(kept) if u not in dropped).strip()
