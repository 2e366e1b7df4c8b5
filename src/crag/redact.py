"""What must not leave the machine: secrets and personal data in outgoing queries.

A question typed into crag may carry an e-mail address, a phone number, an API key
pasted by mistake, a card number or a path that names the user. Before a query goes
to an external service (web search, a remote chat model), each such span is replaced
by a placeholder naming its kind (`[email]`); the state records the kinds removed,
never the values. Every pattern is linear-time (no nested quantifiers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Order matters: specific shapes (keys, cards) before general ones (long numbers).
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("email", re.compile(r"\b[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}\b")),
    # keys with a known prefix: OpenAI, Anthropic, Tavily, GitHub, Slack, AWS, Google, Stripe
    (
        "api key",
        re.compile(
            r"\b(?:sk-(?:proj-|ant-)?|tvly-(?:dev-)?|gh[pousr]_|github_pat_|xox[abposr]-|"
            r"AKIA|ASIA|AIza|(?:sk|pk|rk)_(?:live|test)_)[A-Za-z0-9_\-]{12,200}"
        ),
    ),
    ("token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),  # JWT
    ("token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{16,}=*")),
    ("secret", re.compile(r"\b[0-9a-fA-F]{32,}\b")),  # long hex: keys, hashes of secrets
    # a long run of letters, digits and signs: a secret if it mixes cases and digits
    ("secret", re.compile(r"(?<![\w/+])[A-Za-z0-9+/_-]{32,}={0,2}(?![\w/+])")),
    ("card number", re.compile(r"\b(?:\d[ -]?){12,18}\d\b")),
    ("phone", re.compile(r"(?<![\w+])\+?\(?\d{1,4}\)?(?:[ .-]?\(?\d{2,4}\)?){2,5}(?![\w-])")),
    # paths under a user's folder name the user: /home/alice, /Users/bob, C:\Users\carol
    ("path", re.compile(r"(?:/home/|/Users/|[A-Za-z]:\\Users\\)[^\s/\\]{1,64}\S{0,200}")),
    ("path", re.compile(r"(?<!\w)~/[^\s]{1,200}")),
]


def _luhn(digits: str) -> bool:
    """Card numbers pass the Luhn check; most other long numbers (ISBNs, ids) do not."""
    total, parity = 0, len(digits) % 2
    for i, ch in enumerate(digits):
        d = int(ch)
        if i % 2 == parity:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _is_phone(span: str) -> bool:
    """A phone number has 7-15 digits and is written with a + or separators, not as a
    year, a version, a date or a plain count ("2023", "3.11.2", "120 300")."""
    digits = re.sub(r"\D", "", span)
    if not 7 <= len(digits) <= 15 or "." in span:
        return False
    return span.startswith("+") or "(" in span or len(re.findall(r"[ -]", span)) >= 2


def _mixed(span: str) -> bool:
    """Keys and tokens mix upper case, lower case and digits; words and hex do not
    always, and long hex is matched on its own."""
    if re.fullmatch(r"[0-9a-fA-F]+", span):
        return True
    return (
        any(c.isupper() for c in span)
        and any(c.islower() for c in span)
        and any(c.isdigit() for c in span)
    )


@dataclass
class Redacted:
    text: str
    removed: list[str] = field(default_factory=list)  # the kinds removed, in order, once each


def redact(text: str) -> Redacted:
    """`text` with secrets and personal data replaced by `[kind]` placeholders."""
    removed: list[str] = []

    for kind, pattern in _PATTERNS:

        def swap(match: re.Match[str], kind: str = kind) -> str:
            span = match.group()
            if kind == "card number" and not _luhn(re.sub(r"\D", "", span)):
                return span
            if kind == "phone" and not _is_phone(span):
                return span
            if kind == "secret" and not _mixed(span):
                return span
            removed.append(kind)
            return f"[{kind}]"

        text = pattern.sub(swap, text)
    return Redacted(text, list(dict.fromkeys(removed)))


_PIECE = re.compile(r"[\w.+\-]+")


def _pieces(text: str) -> set[str]:
    return {p.strip(".-+").lower() for p in _PIECE.findall(text)} - {""}


def without_masked(text: str, original: str) -> str:
    """`text`, written from `original` (a keyword query, a part of the question), less
    each word that masking `original` hides. Such text has lost the shape the patterns
    know ("jane.doe example.com" is no e-mail address any more), so what is dropped is
    read from the original."""
    gone = _pieces(original) - _pieces(redact(original).text)
    if not gone:
        return text
    kept = [w for w in text.split() if not (_pieces(w) & gone)]
    return " ".join(kept)
