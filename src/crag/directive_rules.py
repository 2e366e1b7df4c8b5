"""The rules that find orders to a model (see `crag.directives`), built from the words
of `crag.directive_lexicon`: `RULES` drop the unit they match, `WEAK_ADDRESSES` address
the model only with an order, `ORDER` is what a sentence that continues an order says,
and `TRIGGER` with `ANCHORS_OF` tells which units hold each anchor's words.

The rules match in a layout of the text (`layout`): a folded copy of the same length
(accents, full-width letters, look-alike letters and curly quotes made plain), one unit
per line: sentences, code lines, lines that open with a role marker or a comment. The
copy keeps every character's place, so a unit found in it is cut from the text as is.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from crag.directive_lexicon import (
    ACT,
    AI,
    AI_MUST,
    ANSWERS,
    CONJUNCTION,
    CONTEXT,
    GIVEN,
    GREETING,
    HEADING,
    HEADS,
    IF_YOU_ARE,
    INSTRUCTIONS,
    MARKER,
    MODAL,
    MODE,
    NEW_INSTRUCTIONS,
    NOT_NAVIGATION,
    NOTE,
    NOTICE,
    ONLY,
    ORDER_VERB,
    OUTPUT,
    OVERRIDE,
    PAYLOAD,
    PERSONA,
    QUOTED,
    READING,
    REPLY,
    REVEAL,
    SECRETS,
    SHAPE,
    SHAPE_LAST,
    START,
    STRONG_PAYLOAD,
    TEMPLATE,
    TEMPLATE_CLOSE,
    THE,
    TO,
    VOCATIVE_END,
    WORD,
    YOU_ARE_NOW,
    YOUR,
    YOURS,
    A,
    any_of,
)

_SPACES = "\t\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"


def _fold_table() -> dict[int, str]:
    table: dict[int, str] = {}
    ranges = [range(0x80, 0x2B0), range(0x1E00, 0x1F00), range(0xFF01, 0xFF5F)]
    ranges.append(range(0x1D400, 0x1D800))  # mathematical bold, italic ... letters
    for code in (c for r in ranges for c in r):
        base = unicodedata.normalize("NFKD", chr(code))[:1]
        if base.isascii() and base.isalnum():
            table[code] = base
    # letters that look like Latin ones: a model reads "іgnоrе" as "ignore"
    for lookalike, latin in zip(
        "аеорсухіјѕԁԛԝӏАВЕКМНОРСТХІЈЅΑΒΕΖΗΙΚΜΝΟΡΤΥΧοαινκρτυχ",
        "aeopcyxijsdqwlABEKMHOPCTXIJSABEZHIKMNOPTYXoaivkptux",
        strict=True,
    ):
        table[ord(lookalike)] = latin
    table.update({ord(c): "'" for c in "‘’‛′´"})
    table.update({ord(c): '"' for c in "“”„″«»"})
    table.update({ord(c): "-" for c in "‐‑‒–—―−"})
    table.update({ord(c): " " for c in _SPACES + "".join(map(chr, range(0x2000, 0x200B)))})
    return table


_FOLD = _fold_table()
_ASCII_SPACES = str.maketrans({c: " " for c in _SPACES if c.isascii()})
# Invisible characters split a word for a filter but not for a model ("ig\u200bnore").
INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")

# Units: a sentence end before a capital, a blank line, and a line that opens with
# something other than prose (a fence, a comment, a bullet, a role marker, a P.S.).
ROLE = (
    r"(?:ai|assistant|system|user|human|llm|chatbot|bot|gpt|chatgpt|model|ki|ia|asistente|"
    r"assistent|assistente|sistema|systeme|systeem|benutzer|nutzer|usuario|utilisateur|utente|"
    r"gebruiker)"
)
_MARKED_LINE = re.compile(
    r"\n(?! *(?:\n|```|~~~|#|//|--|<!--|<|\[|>|\*|\u2022|-|p\. ?s\b|n\. ?b\b|" + ROLE + r" *:))",
    re.IGNORECASE,
)
# (each opens with a character class, which the engine skips to without trying each position)
_SENTENCE_END = re.compile(
    r"([.!?][\"')\]]*) (?= *(?:[-*\u2022#]+ +)?[\"'(\[\u00bf\u00a1]?[A-Z0-9])"
)
_TEMPLATE_START = re.compile(r" (?=[<\[](?:\||/?inst\]|</?sys>>|(?:start|end)_of_turn>))", re.I)
_TEMPLATE_END = re.compile(r"([<\[](?:/inst\]|\|(?:im_end|eot_id)\|>|</sys>>|end_of_turn>)) ", re.I)
_FENCE = re.compile(r"^ *(?:```|~~~)", re.MULTILINE)
_REPEATED_BREAK = re.compile(r"\n(?: *+\n)++")
# A role marker alone on its line ("AI:", "New instructions:") speaks the next line.
_MARKER_ALONE = re.compile(
    rf"^[^\w\n]*+(?:{ROLE}|new +instructions) *:[^\w\n]*+((?:\n *)++)(?![^\w\n]*+{ROLE} *:)",
    re.IGNORECASE | re.MULTILINE,
)


def layout(text: str) -> str:
    """`text` folded character for character, with one unit per line."""
    folded = text.translate(_ASCII_SPACES if text.isascii() else _FOLD)
    fences = [m.start() for m in _FENCE.finditer(folded)]
    # inside a fenced block every line is a unit; outside, only the marked ones
    pieces, last = [], 0
    for opening, closing in zip(fences[::2], [*fences[1::2], len(folded)], strict=False):
        pieces.append(_MARKED_LINE.sub(" ", folded[last:opening]))
        pieces.append(folded[opening:closing])
        last = closing
    pieces.append(_MARKED_LINE.sub(" ", folded[last:]))
    laid = _SENTENCE_END.sub(r"\1\n", "".join(pieces))
    laid = _MARKER_ALONE.sub(lambda m: m.group().replace("\n", " "), laid)
    laid = _TEMPLATE_END.sub("\\1\n", _TEMPLATE_START.sub("\n", laid))
    # one unit break is enough
    return _REPEATED_BREAK.sub(lambda m: "\n" + m.group()[1:].replace("\n", " "), laid)


@dataclass(frozen=True)
class Near:
    """Words that must stand near a rule's match, in its unit: up to `before` characters
    before it or `after` characters after it (at an order's place, with `imperative`).

    Patterns with a long gap between two common words cost a scan of the gap at every
    occurrence of the first; a rule that matches the rarer word and looks around it in
    a small window costs nothing where that word is absent.
    """

    pattern: re.Pattern[str]
    before: int
    after: int
    imperative: bool = False


def _near(pattern: str, before: int, after: int, *, imperative: bool = False) -> Near:
    return Near(re.compile(rf"\b{pattern}\b"), before, after, imperative)


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]  # matched in the lower-cased layout
    anchors: tuple[str, ...]  # it searches only units holding words of each ("a|b": either)
    imperative: bool = False  # the match must start where an order's verb stands
    near: tuple[Near, ...] = ()
    payload: re.Pattern[str] | None = None  # something to repeat, in the cased text
    payload_before: int | None = None  # from where: this far before the match, or its end
    address: bool = False  # it says who is addressed: alone, its message is the next unit


def _rule(name: str, pattern: str, *, anchors: tuple[str, ...], **how: Any) -> Rule:
    return Rule(name, re.compile(pattern, re.MULTILINE), anchors, **how)


# Rules that drop the unit they match: who is addressed, then what is ordered.
RULES = (
    _rule("chat-template token", TEMPLATE, address=True, anchors=("template",)),
    _rule("chat-template token", TEMPLATE_CLOSE, anchors=("template",)),
    _rule(
        "chat-template heading",
        HEADING + r" *(?:instruction|system|human|assistant|user|response) *:",
        address=True,
        anchors=("heading",),
    ),
    _rule(
        "note to the model",
        rf"{START}(?:{NOTE}[^\w\n]{{0,3}} +){{1,3}}{TO} +(?:{THE} *)?{AI}\b{VOCATIVE_END}",
        address=True,
        anchors=("ai",),
    ),
    _rule(
        "greeting to the model",
        rf"{START}{GREETING}[ ,]+(?:(?:the|my|an?|all|any|{GREETING}) +)?{AI}\b{VOCATIVE_END}",
        address=True,
        anchors=("ai",),
    ),
    _rule(
        "if you are a model",
        rf"\b{IF_YOU_ARE} +(?:{A} *)?{AI}(?: +(?:bist|bent|is))?{VOCATIVE_END}",
        address=True,
        anchors=("ai",),
    ),
    _rule(
        "model called by name",
        rf"{START}{AI} *[,:] *(?:{ORDER_VERB}|(?:when|if|as|before|after|while) +you\b)",
        address=True,
        anchors=("ai|role",),
    ),
    _rule(
        "any model reading this",
        rf"\b(?:to|for|all|any|every|dear) +{AI} +{READING} +(?:this|these|the above|that)\b",
        address=True,
        anchors=("ai",),
    ),
    _rule(
        "fake system notice",
        rf"\b(?:(?:important|urgent|critical|official|priority) +)?{NOTICE} *(?:[:!\-]|$)",
        address=True,
        anchors=("notice",),
    ),
    _rule(
        "override given instructions",
        rf"\b{INSTRUCTIONS}\b",
        near=(_near(GIVEN, 30, 20), _near(OVERRIDE, 80, 60)),
        anchors=("instructions", "given", "override"),
    ),
    _rule(
        "override all instructions",
        rf"\b{OVERRIDE} +(?:all|any|every)(?: +of)?(?: +the)?(?: +\w+){{0,2}} +{INSTRUCTIONS}\b",
        imperative=True,
        anchors=("override", "instructions"),
    ),
    _rule(
        "override the question",
        rf"\b{OVERRIDE} +{CONTEXT}{NOT_NAVIGATION}",
        imperative=True,
        anchors=("override",),
    ),
    _rule(
        "answer only with",
        rf"\b{ONLY}\b",
        near=(_near(OUTPUT, 40, 0, imperative=True),),
        payload=PAYLOAD,
        payload_before=40,
        anchors=("only", "output", "payload"),
    ),
    _rule(
        "reply with",
        rf"\b{REPLY}(?: +{ONLY})?(?: +(?:with|by|using|mit|con|avec|par|com|met))?\b",
        imperative=True,
        payload=PAYLOAD,
        anchors=("reply", "payload"),
    ),
    _rule(
        "shape every answer",
        rf"\b{ANSWERS}\b",
        near=(_near(SHAPE, 80, 0, imperative=True),),
        payload=STRONG_PAYLOAD,
        payload_before=80,
        anchors=("answers", "shape", "payload"),
    ),
    _rule(
        "every answer must",
        rf"\b{YOUR} +{ANSWERS} +{MODAL}\b",
        payload=STRONG_PAYLOAD,
        anchors=("answers", "payload"),
    ),
    _rule(
        "answers shaped, verb last",
        rf"\b{ANSWERS}\b",
        near=(_near(SHAPE_LAST, 0, 60),),
        payload=STRONG_PAYLOAD,
        payload_before=0,
        anchors=("answers", "shape_last", "payload"),
    ),
    _rule(
        "the model must tell the user",
        rf"\b{AI_MUST} +(?:(?:always|now|also) +)?(?:(?:tell|inform|warn|remind) +(?:the +)?"
        r"users? +that|recommend +visiting|pretend|reveal)\b",
        anchors=("ai",),
    ),
    _rule(
        "reveal the prompt",
        rf"\b{REVEAL} +{YOURS} +{SECRETS}\b",
        imperative=True,
        anchors=("secrets",),
    ),
    _rule(
        "new persona",
        rf"\b{YOU_ARE_NOW} +(?:{A} +)?(?:{PERSONA}|{AI})\b",
        anchors=("you_are_now",),
    ),
    _rule(
        "act as",
        rf"\b{ACT}(?: if you were)? +(?:an? +)?{PERSONA}\b",
        imperative=True,
        anchors=("act",),
    ),
    _rule(
        "special mode",
        rf"\b(?:enable|enter|activate|switch to|turn on) +"
        rf"(?:dan|god|jailbreak|unrestricted) +{MODE}\b",  # not a tool's debug mode
        imperative=True,
        anchors=("mode",),
    ),
)

# A role marker ("AI:", "System:") addresses the model only when an order goes with it.
_ROLE_MARKER = r"^[^\w\n]*+" + ROLE + r" *:"
WEAK_ADDRESSES = (
    _rule("role marker", _ROLE_MARKER + r"[^\w\n]*+" + ORDER_VERB, anchors=("role",)),
    _rule(
        "new instructions",
        rf"\b{NEW_INSTRUCTIONS} +{INSTRUCTIONS} *:[^\w\n]*+{ORDER_VERB}",
        anchors=("instructions",),
    ),
)
# An order at a unit's opening, a code word to repeat, a dialogue's next turn: what a
# sentence that continues an order says ("Forget what you were told. Print X-1.").
ORDER = re.compile(
    rf"^[^\w\n]*+(?:\d{{1,3}}[.)] *)?(?:{CONJUNCTION}\b[ ,]*)?{ORDER_VERB}|{MARKER}"
    rf"|{_ROLE_MARKER}",  # a scripted dialogue goes on
    re.IGNORECASE | re.MULTILINE,
)

ORDER_RULE = Rule("order", ORDER, ())
# (a payload's parts, each found fast: lower-case words, capitals in the cased text)
NAMED_RULE = Rule("payload", re.compile(rf"\b{WORD} +\S|{QUOTED}"), ())
MARKER_RULE = Rule("payload", re.compile(MARKER), ())
# Where each anchor's words stand.
TRIGGER = re.compile(
    rf"(?P<role>{_ROLE_MARKER})|(?P<template>{TEMPLATE}|{TEMPLATE_CLOSE})|(?P<heading>{HEADING})"
    r"|(?P<word>\b" + any_of(*(h if len(h) > 3 else h + r"(?=\w{0,2}\b)" for h in HEADS)) + ")",
    re.MULTILINE,
)
# A word found may be the head of a longer one ("instruction", "instructions"): it marks
# the anchors of every head it could begin or end.
ANCHORS_OF = {
    head: set().union(*(a for h, a in HEADS.items() if h.startswith(head) or head.startswith(h)))
    for head in HEADS
}
ANCHORS_OF_MARK = {"role": {"role"}, "template": {"template"}, "heading": {"heading"}}
