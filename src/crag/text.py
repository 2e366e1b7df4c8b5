"""The text toolkit: words, sentences, strips and stopwords, for every module.

No models here. Two tokenisations and two sentence splitters serve two needs and
are kept apart on purpose: `terms`/`split_sentences` keep technical terms (C++,
TF-IDF) and cut sentences conservatively for the strips a reader sees, while
`words`/`clauses` feed the grader's answer-type features, which want possessives
joined to their word and a cut at every clause.
"""

from __future__ import annotations

import functools
import re
import string
import unicodedata

# --- one normal form for library text, questions and external results ----------------------

# Typeset text writes what people type in ASCII in other characters.
_FOLD = str.maketrans(
    {
        **dict.fromkeys("×✕✖⨯", "x"),  # 3 × 3
        **dict.fromkeys("‐‑‒–—―−﹣－", "-"),  # en/em dashes, minus signs
        **dict.fromkeys("‘’‛′", "'"),
        **dict.fromkeys("“”„″", '"'),
        "\u00ad": None,  # soft hyphen
    }
)
# "normal-\nization": a word hyphenated across a line break is one word (a hyphen or a
# soft one; a dash there ends a clause: "the model—\nwhich" is two words).
_LINE_BREAK_HYPHEN = re.compile(r"(?<=[^\W\d_])[-\u00ad\u2010\u2011]\n(?=[^\W\d_])")


def _greek_names() -> dict[str, str]:
    names = {}
    for code in range(0x0391, 0x03FF):
        ch = chr(code)
        name = unicodedata.name(ch, "")
        if name.startswith("GREEK") and " LETTER " in name:
            # Unicode spells lambda "LAMDA"
            names[ch] = name.rsplit(" ", 1)[-1].lower().replace("lamda", "lambda")
    return names


_GREEK = str.maketrans(_greek_names())
_GREEK_SPACED = str.maketrans({ch: f" {name} " for ch, name in _greek_names().items()})


@functools.lru_cache(maxsize=4096)  # a question's passages are read by several nodes
def normalize(text: str, *, spaced_greek: bool = False) -> str:
    """The form in which crag compares texts: NFKC (ligatures, sub- and superscript
    digits, full-width forms), accents dropped, typographic folding (× to x, dashes and
    minus signs to "-", curly quotes to straight, soft hyphens dropped), words
    hyphenated across a line break rejoined, Greek letters written as their names
    ("2πσ" as "2pisigma", or with `spaced_greek` as "2 pi sigma"). Case is kept.

    People type questions in ASCII ("beta", "3x3", "-"); books and web pages are
    typeset ("β", "3×3", "–"): comparing both in this form makes them meet.
    """
    text = _LINE_BREAK_HYPHEN.sub("", text)
    text = unicodedata.normalize("NFKC", text).translate(_FOLD)
    if text.isascii():
        return text
    # accents and other combining marks ("σ̂", "é") do not make another word
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return text.translate(_GREEK_SPACED if spaced_greek else _GREEK)


_FOLDED_WORD = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def folded_words(text: str) -> list[str]:
    """Lower-case words of the normal form, hyphenated compounds whole ("tf-idf")."""
    return _FOLDED_WORD.findall(normalize(text).lower())


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
    rf"(?<!\b{re.escape(a)})"
    for a in (
        "e.g.", "i.e.", "vs.", "etc.", "Fig.", "Eq.", "No.", "al.", "cf.", "approx.", "Sec.",
        "Ch.", "Vol.", "pp.", "Dr.", "Mr.", "Mrs.", "Ms.", "Prof.", "St.", "Jr.", "Sr.",
        "Inc.", "Ltd.", "Co.", "U.S.", "U.K.",
    )
)  # fmt: skip
_SENTENCE_END = re.compile(_ABBREV + r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n\s*\n")
TERM = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-\+\.']*[A-Za-z0-9\+]|[A-Za-z0-9]")


def split_sentences(text: str) -> list[str]:
    """Sentences of a passage, whitespace-normalised; fragments stay attached."""
    return list(_sentences(text))


def sentence_ends(text: str) -> list[int]:
    """Where each sentence of `text` ends, as it is written (trailing space excluded)."""
    ends, start = [], 0
    for end in [*(m.start() for m in _SENTENCE_END.finditer(text)), len(text)]:
        if text[start:end].strip():
            ends.append(len(text[:end].rstrip()))
            start = end
    return ends


#: A Markdown heading's marks ("## Power"): page furniture, not words of the sentence.
_HEADING = re.compile(r"^#{1,6}\s+")


@functools.lru_cache(maxsize=1024)  # retrieval, grading and refinement cut the same passages
def _sentences(text: str) -> tuple[str, ...]:
    parts = [" ".join(p.split()) for p in _SENTENCE_END.split(text)]
    sentences: list[str] = []
    for part in parts:
        heading = _HEADING.match(part)
        part = part[heading.end() :] if heading else part
        if not part:
            continue
        if sentences and len(part) < 12 and not heading:  # a heading ends no sentence
            sentences[-1] = f"{sentences[-1]} {part}"
        else:
            sentences.append(part)
    return tuple(sentences)


def strips_of(text: str, sentences_per_strip: int) -> list[str]:
    """Decompose a passage into strips of n consecutive sentences (CRAG refinement).

    Pass text from `crag.directives.without_directives` (refine does): a strip is
    what a model reads, and small models obey orders even inside delimited data.
    """
    sentences = _sentences(text)
    n = max(1, sentences_per_strip)
    return [" ".join(sentences[i : i + n]) for i in range(0, len(sentences), n)]


def terms(text: str) -> list[str]:
    """Words as a technical reader writes them: "C++", "TF-IDF", "e.g." stay whole."""
    return TERM.findall(text)


#: A contraction's or possessive's ending: "what's" is "what", "pytest's" is "pytest".
_CLITIC = re.compile(r"'(?:s|re|ve|ll|d|m)$", re.IGNORECASE)
#: Negations whose verb is not what precedes "n't".
_NEGATED = {"ca": "can", "wo": "will", "sha": "shall", "ai": "is"}


def without_clitic(term: str) -> str:
    """A term without a contraction's or possessive's ending, as written ("CatBoost's"
    is "CatBoost", "doesn't" is "does", "can't" is "can")."""
    word = term.strip(".'")
    if word.lower().endswith("n't"):
        return _NEGATED.get(word[:-3].lower(), word[:-3])
    return _CLITIC.sub("", word)


def bare_word(term: str) -> str:
    """A term lower-cased, without a contraction's or possessive's ending."""
    return without_clitic(term).lower()


def content_words(text: str) -> list[str]:
    """Lower-cased terms that carry meaning (stopwords and 1-letter tokens dropped), each
    without a contraction's or possessive's ending, in the normal form (accents dropped,
    curly quotes straight)."""
    found = [bare_word(w) for w in terms(normalize(text))]  # "Gödel's" is "godel"
    return [w for w in found if len(w) > 1 and w not in STOPWORDS]


def keyword_query(question: str, max_terms: int = 8) -> str:
    """A deterministic search query: the question's content words, first seen first."""
    terms = list(dict.fromkeys(content_words(question)))
    return " ".join(terms[:max_terms]) or question.strip()


# --- words and clauses for the grader's answer-type features ---------------------------------

WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?(?:[.\-][A-Za-z0-9]+)*")
# "Nov. 12", "Dr. No", "U.S. Open", "J. Smith": a full stop after these is no sentence end.
_NO_END = "".join(
    rf"(?<!\b{a}\.)"
    for a in "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Mr Mrs Ms Dr St Jr Sr No vs "
    "Vol [A-Z]".split()
)
_CLAUSE_END = re.compile(rf"{_NO_END}(?<=[.!?;])\s+|\n+")
MONTHS = frozenset(
    "jan feb mar apr may jun jul aug sep sept oct nov dec january february march april "
    "june july august september october november december".split()
)


def words(text: str) -> list[str]:
    """Words with their possessive ("Facebook's") and inner dots or hyphens ("U.S.")."""
    return WORD.findall(text)


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stripper: "models", "modeling" and "modeled" meet at "model"."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    for suffix in ("ies", "ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            return w[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return w


def stems(text: str) -> set[str]:
    """The stems of a text's words, hyphenated or joined by "_" ("monthly_price")."""
    return {stem(w) for w in folded_words(text.replace("-", " "))}


def clauses(text: str) -> list[str]:
    """Sentences and clauses (also cut at ";" and at line breaks)."""
    parts = [s.strip() for s in _CLAUSE_END.split(text) if s and len(s.strip()) > 3]
    return parts or [text]


# "Feb 25, 2018 ... ": how a search engine opens a snippet with its page's date.
_DATE_STAMP = re.compile(r"^[ \t]*([A-Z][a-z]{2,8}\.? \d{1,2}, \d{4}) \.\.\.[ \t]*", re.MULTILINE)


def split_date_stamps(snippet: str) -> tuple[str, list[str]]:
    """A search result's text without the dates that open its snippets, and those dates.

    The date says when the page was published: metadata about the result, not part of
    what it says (read as text, every result of one day would seem to agree on a date).
    """
    dates = _DATE_STAMP.findall(snippet)
    return (_DATE_STAMP.sub("", snippet) if dates else snippet), dates


# C0 and C1 control characters but line breaks and tabs: a terminal obeys them
# (ESC[2J clears the screen, OSC sequences retitle the window, BEL rings).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ANY_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str, *, one_line: bool = False) -> str:
    """Text safe to print to a terminal: control characters written as \\xNN escapes
    (with `one_line`, line breaks and tabs too: a file name must not break a line).

    Document text, file names and web results are other people's bytes.
    """
    pattern = _ANY_CONTROL if one_line else _CONTROL
    return pattern.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def counted(n: int, noun: str) -> str:
    """`n` things, for a person to read: "1 source", "3 sources"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def brief(text: object, limit: int = 160) -> str:
    """One short line of any text (an error that quotes a whole reply): its first line,
    cut at `limit` characters, for a log warning a person can read."""
    lines = str(text).strip().splitlines()
    first = lines[0] if lines else ""
    return first if len(first) <= limit else first[: limit - 1] + "…"


def sentence_key(sentence: str) -> str:
    """A sentence as its words: line breaks, hyphenation, case and typography aside."""
    return " ".join(folded_words(sentence))


def word_forms(word: str) -> tuple[str, ...]:
    """A word and its singular or plural: "GANs" is found where the book says "GAN"."""
    if word.endswith("es") and len(word) > 4:
        return word, word[:-2], word[:-1]
    if word.endswith("s") and len(word) > 3:
        return word, word[:-1]
    return word, word + "s", word + "es"


#: British and American spellings of one word's ending, either way round.
_SPELLING_PAIRS = (
    ("isation", "ization"), ("ise", "ize"), ("ised", "ized"), ("ises", "izes"),
    ("ising", "izing"), ("iser", "izer"), ("isers", "izers"), ("yse", "yze"),
    ("ysed", "yzed"), ("ysing", "yzing"), ("our", "or"), ("ours", "ors"),
    ("lled", "led"), ("lling", "ling"), ("ller", "ler"), ("tre", "ter"), ("tres", "ters"),
    ("ence", "ense"),
)  # fmt: skip
_SPELLINGS = {a: b for a, b in _SPELLING_PAIRS} | {b: a for a, b in _SPELLING_PAIRS}
_ENDING = re.compile("(" + "|".join(sorted(_SPELLINGS, key=len, reverse=True)) + ")$")
#: The fewest letters before an ending that is respelt ("rise" has no "-ise" ending).
_MIN_RESPELT_STEM = 3
#: The fewest letters of a verb a past participle is read as ("pretrained": "pretrain").
_MIN_VERB = 4


def _spelling_ending(word: str) -> re.Match[str] | None:
    end = _ENDING.search(word)
    return end if end and end.start() >= _MIN_RESPELT_STEM else None


def respelt(word: str) -> str:
    """A lower-case word in the other of British and American spelling ("normalisation",
    "normalization"); the word itself where the two agree."""
    end = _spelling_ending(word)
    return word[: end.start()] + _SPELLINGS[end.group(1)] if end else word


def _unspelt(word: str) -> str:
    """What a word's British and American spellings share ("normali")."""
    end = _spelling_ending(word)
    return word[: end.start()] if end else word


def word_variants(word: str) -> tuple[str, ...]:
    """A lower-case word as a text may also write it: respelt (`respelt`), and a past
    participle as its verb ("convolved", "convolve"). Not an -ing form: "boosting" and
    "pooling" name techniques that a text writing "boost" or "pool" need not know."""
    found = [word, respelt(word)]
    if word.endswith("ed") and len(word) - 2 >= _MIN_VERB:
        found += [word[:-2], word[:-1]]
    return tuple(dict.fromkeys(found))


#: The shortest word a typing slip is looked for in: shorter words are too often another
#: word one letter away ("attrs", "click"); one longer than the longest is no word.
MIN_SLIP_LENGTH, MAX_SLIP_LENGTH = 7, 40


def slips(word: str, *, same_letters: bool = False) -> set[str]:
    """The lower-case words one typing slip from `word`: a letter dropped, added or
    changed, or two neighbours swapped; with `same_letters`, only two neighbours swapped
    or a letter doubled or undoubled ("dropuot", "droppout"), so that names one letter
    apart ("resnext" and "resnet", "wavenet" and "wavelet") stay apart. Empty for a word
    too short or too long, or not lower-case letters alone."""
    if word != word.lower() or not word.isalpha():
        return set()
    if not MIN_SLIP_LENGTH <= len(word) <= MAX_SLIP_LENGTH:
        return set()
    cuts = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    near = {a + b[1] + b[0] + b[2:] for a, b in cuts if len(b) > 1}
    if same_letters:
        near |= {a + b[1:] for a, b in cuts if a and b and a[-1] == b[0]}
        near |= {a + b[0] + b for a, b in cuts if b}
    else:
        letters = string.ascii_lowercase
        near |= {a + b[1:] for a, b in cuts if b}
        near |= {a + c + b[1:] for a, b in cuts if b for c in letters}
        near |= {a + c + b for a, b in cuts for c in letters}
    return near - {word}


def _digit_pieces(word: str) -> list[str]:
    # "l2" is also written with its digit as a subscript: "ℓ_2", "L 2"
    return re.split(r"(?<=[a-z])(?=\d)", word)


def named_pieces(phrase: str) -> list[list[str]]:
    """A phrase's words, each cut before its closing digits and to what its British and
    American spellings share: what a text that names the phrase (`named_pattern`)
    contains."""
    return [_digit_pieces(_unspelt(w)) for w in folded_words(phrase.replace("-", " "))]


def named_pattern(phrase: str) -> re.Pattern[str] | None:
    """A phrase as normal-form text may write it: each word in British or American
    spelling, between its words (and before a word's closing digits) spaces, line
    breaks, hyphens or other punctuation ("u.s.", "l_2"), and a plural at the end."""
    words = folded_words(phrase.replace("-", " "))
    if not words:
        return None

    def spelt(word: str) -> str:
        ways = sorted(
            r"[\W_]*".join(map(re.escape, _digit_pieces(w))) for w in {word, respelt(word)}
        )
        return ways[0] if len(ways) == 1 else "(?:" + "|".join(ways) + ")"

    body = r"[\W_]*".join(spelt(w) for w in words)
    return re.compile(r"(?<![a-z0-9])" + body + r"(?:s|es)?(?![a-z0-9])")


def times_named(phrase: str, text: str) -> int:
    """How many times `text` names `phrase`, in any usual spelling."""
    pattern = named_pattern(phrase)
    return len(pattern.findall(normalize(text).lower())) if pattern else 0
