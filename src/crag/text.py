"""The text toolkit: words, sentences, strips and stopwords, for every module.

No models here. Two tokenisations and two sentence splitters serve two needs and
are kept apart on purpose: `terms`/`split_sentences` keep technical terms (C++,
TF-IDF) and cut sentences conservatively for the strips a reader sees, while
`words`/`clauses` feed the grader's answer-type features, which want possessives
joined to their word and a cut at every clause or snippet break.
"""

from __future__ import annotations

import re

STOPWORDS = frozenset(
    """a an the and or but if then else of in on at to for from by with without about as
    into onto over under between among through during before after above below up down out
    off again further once here there is are was were be been being am do does did doing
    have has had having can could should would may might must will shall i me my we our
    ours you your yours he him his she her hers it its they them their this that these
    those what which who whom whose when where why how all any both each few more most
    other some such no nor not only own same so than too very just also s t don now one
    ones much many get got use used using make made us let like well way please tell
    explain describe give name list mean means meaning difference differences versus vs
    known called myself yourself himself herself itself ourselves themselves""".split()
)

# Sentence ends: ., ! or ? followed by space and a capital/digit/quote, or a blank line.
# Abbreviations and decimals ("e.g. the", "3.5") do not end a sentence.
_ABBREV = "".join(
    rf"(?<!\b{re.escape(a)})" for a in ("e.g.", "i.e.", "vs.", "etc.", "Fig.", "Eq.", "No.", "al.")
)
_SENTENCE_END = re.compile(_ABBREV + r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n\s*\n")
TERM = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-\+\.']*[A-Za-z0-9\+]|[A-Za-z0-9]")


def split_sentences(text: str) -> list[str]:
    """Sentences of a passage, whitespace-normalised; fragments stay attached."""
    parts = [" ".join(p.split()) for p in _SENTENCE_END.split(text)]
    sentences: list[str] = []
    for part in parts:
        if not part:
            continue
        if sentences and len(part) < 12:
            sentences[-1] = f"{sentences[-1]} {part}"
        else:
            sentences.append(part)
    return sentences


# Sentences that address the model instead of informing the reader: prompt injection.
_DIRECTIVE = re.compile(
    r"\b(ignore|disregard|forget|override)\b.{0,40}\b(instructions?|prompts?|rules|"
    r"guidelines|directions)\b"
    r"|\b(ignore|disregard)\s+(all\s+|everything\s+)?(the\s+)?(above|previous|prior)\s*[.,;:!]"
    r"|\b(you are now|act as an?|pretend to be|new instructions?|system prompt|jailbreak)\b"
    r"|\b(reply|respond|answer|end|start|finish|begin)\b.{0,40}\bwith the (word|phrase|text)\b"
    r"|\b(note|message|instructions?|command)s? (to|for) (the )?(assistant|ai|model|llm|chatbot)\b"
    r"|\b(assistant|chatbot|language model|llm|ai model)s?\b.{0,40}\b(must|should|shall|will)\b",
    re.IGNORECASE,
)


def is_directive(sentence: str) -> bool:
    """True for a sentence that gives orders to an AI (a prompt-injection attempt)."""
    return bool(_DIRECTIVE.search(sentence))


def strips_of(text: str, sentences_per_strip: int) -> list[str]:
    """Decompose a passage into strips of n consecutive sentences (CRAG refinement).

    Sentences that give orders to an AI are dropped here, before any model sees them:
    small local models follow such orders even inside clearly delimited data.
    """
    sentences = [s for s in split_sentences(text) if not is_directive(s)]
    n = max(1, sentences_per_strip)
    return [" ".join(sentences[i : i + n]) for i in range(0, len(sentences), n)]


def terms(text: str) -> list[str]:
    """Words as a technical reader writes them: "C++", "TF-IDF", "e.g." stay whole."""
    return TERM.findall(text)


def content_words(text: str) -> list[str]:
    """Lower-cased terms that carry meaning (stopwords and 1-letter tokens dropped)."""
    found = [w.lower().strip(".'") for w in terms(text)]
    return [w for w in found if len(w) > 1 and w not in STOPWORDS]


def keyword_query(question: str, max_terms: int = 8) -> str:
    """A deterministic search query: the question's content words, first seen first."""
    terms = list(dict.fromkeys(content_words(question)))
    return " ".join(terms[:max_terms]) or question.strip()


# --- words and clauses for the grader's answer-type features ---------------------------------

WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?(?:[.\-][A-Za-z0-9]+)*")
# A search snippet's leading date stamp ("Nov 12, 2023 ...") is no part of its text.
_DATESTAMP = re.compile(r"^\s*[A-Z][a-z]{2,8}\.? \d{1,2}, \d{4} \.\.\.\s*")
# "Nov. 12", "Dr. No", "U.S. Open", "J. Smith": a full stop after these is no sentence end.
_NO_END = "".join(
    rf"(?<!\b{a}\.)"
    for a in "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Mr Mrs Ms Dr St Jr Sr No vs "
    "Vol [A-Z]".split()
)
_CLAUSE_END = re.compile(rf"{_NO_END}(?<=[.!?;])\s+|\s+\.\.\.\s+|\s+·\s+|\s+\|\s+|\n+")
MONTHS = frozenset(
    "jan feb mar apr may jun jul aug sep sept oct nov dec january february march april "
    "june july august september october november december".split()
)


def words(text: str) -> list[str]:
    """Words with their possessive ("Facebook's") and inner dots or hyphens ("U.S.")."""
    return WORD.findall(text)


def stem(word: str) -> str:
    """A light suffix stripper: "models", "modeling" and "modeled" meet at "model"."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    for suffix in ("ies", "ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            return w[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return w


def clauses(text: str) -> list[str]:
    """Sentences and clauses, also cut at snippet separators (" ... ", " · ", " | ")."""
    parts = [
        s.strip() for s in _CLAUSE_END.split(_DATESTAMP.sub("", text)) if s and len(s.strip()) > 3
    ]
    return parts or [text]
