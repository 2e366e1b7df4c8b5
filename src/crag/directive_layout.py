"""The layout a text is searched for orders to a model in (see `crag.directives`): a
folded copy of the same length (accents, full-width letters, look-alike letters and curly
quotes made plain), one unit per line: sentences, code lines, lines that open with a role
marker or a comment.

The copy keeps every character's place, so a unit found in it is cut from the text as is.
"""

from __future__ import annotations

import re
import unicodedata

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
