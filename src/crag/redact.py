"""What must not leave the machine: secrets and personal data in outgoing queries.

A question typed into crag may carry an e-mail address, a phone number, an API key
pasted by mistake, a card number or a path that names the user. Before a query goes
to an external service (web search, a remote chat model or embeddings), each such span
is replaced by a placeholder naming its kind (`[email]`); the state records the kinds
removed, never the values. Every pattern is linear-time (no nested quantifiers).

Apart from what a user types, the machine's own secrets (API keys in the environment)
must never show in what crag writes: `scrub` removes them from errors, logs and the
state, since a server's error message may quote the key it was sent.

A model client masks text deep inside a node; `collecting` lets the node's wrapper
learn which kinds were removed meanwhile, so that they reach the state too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

# Order matters: specific shapes (keys, cards) before general ones (long numbers).
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("email", re.compile(r"\b[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}\b")),
    # keys with a known prefix: OpenAI, Anthropic, Tavily, GitHub, Slack, Google, Stripe
    # (a random body holds a digit; "sk-learn-compatible" is a word), and AWS's exact shape
    (
        "api key",
        re.compile(
            r"\b(?:sk-(?:proj-|ant-)?|tvly-(?:dev-)?|gh[pousr]_|github_pat_|xox[abposr]-|"
            r"AIza|(?:sk|pk|rk)_(?:live|test)_)(?=[A-Za-z_\-]*\d)[A-Za-z0-9_\-]{12,200}"
            r"|\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"
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


#: A placeholder left where something was masked.
_PLACEHOLDER = re.compile(
    r"\[(?:" + "|".join(re.escape(kind) for kind in dict.fromkeys(k for k, _ in _PATTERNS)) + r")\]"
)
#: A date written with hyphens (2024-11-05, 05-11-2024): digits and separators, as a
#: phone number is, but no one's number.
_DATE = re.compile(r"\b(?:\d{4}-\d{1,2}-\d{1,2}|\d{1,2}-\d{1,2}-\d{4})\b")


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
    if not 7 <= len(digits) <= 15 or "." in span or _DATE.search(span):
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

    @property
    def bare(self) -> str:
        """The text without its placeholders: "[email]" is no word to search for."""
        return " ".join(_PLACEHOLDER.sub(" ", self.text).split())


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


#: The kinds masked during the current node (None outside a `collecting` block).
_COLLECTED: ContextVar[list[str] | None] = ContextVar("crag_masked", default=None)


@contextlib.contextmanager
def collecting() -> Iterator[list[str]]:
    """The kinds `masked` removes inside the block (in worker threads started from it too)."""
    kinds: list[str] = []
    token = _COLLECTED.set(kinds)
    try:
        yield kinds
    finally:
        _COLLECTED.reset(token)


def masked(text: str) -> str:
    """`text` as it may leave the machine; the kinds removed are noted for the state."""
    result = redact(text)
    kinds = _COLLECTED.get()
    if kinds is not None:
        kinds.extend(k for k in result.removed if k not in kinds)
    return result.text


# --- secrets of the machine in crag's own output -------------------------------------------

#: Environment variables holding secrets: API keys, tokens, passwords.
_SECRET_NAME = re.compile(r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD)$", re.IGNORECASE)
#: Shorter values are not treated as secrets (they would mask ordinary words).
_MIN_SECRET = 8
_KEY_SHAPES = [p for kind, p in _PATTERNS if kind in ("api key", "token")]


def secret_values() -> list[str]:
    """The values of the secret environment variables, longest first."""
    values = {
        value
        for name, value in os.environ.items()
        if _SECRET_NAME.search(name) and len(value) >= _MIN_SECRET
    }
    return sorted(values, key=len, reverse=True)


def scrub(text: str, *, shapes: bool = True, secrets: Sequence[str] | None = None) -> str:
    """`text` without the machine's secrets: the values of its secret environment
    variables (`secrets`, read from the environment unless given) and (with `shapes`)
    anything shaped like an API key or token. For what crag writes itself (errors, logs,
    the state); a server's error message may quote the key it was sent."""
    for value in secret_values() if secrets is None else secrets:
        if value in text:
            text = text.replace(value, "[secret]")
    if shapes:
        for pattern in _KEY_SHAPES:
            text = pattern.sub("[secret]", text)
    return text


def _message(record: logging.LogRecord) -> str:
    """The record's message as a handler would print it. Arguments that do not fit the
    format are shown beside it, not raised: the handler's own error report would quote
    them unscrubbed."""
    try:
        return record.getMessage()
    except Exception:
        return f"{record.msg} {record.args!r}"


def _scrub_record(record: logging.LogRecord) -> None:
    """A log record's message, arguments and traceback, scrubbed (formatted once, here).
    It runs inside the logging machinery, for records of any shape, so it never raises:
    a record it cannot read loses its text rather than risk showing a key."""
    try:
        record.msg, record.args = scrub(_message(record)), ()
        exc_info = record.exc_info
        if isinstance(exc_info, tuple) and exc_info[0] is not None and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(exc_info)
        if isinstance(record.exc_text, str):
            record.exc_text = scrub(record.exc_text)
    except Exception:
        record.msg, record.args, record.exc_text = "(a log record that could not be read)", (), None


class SecretFilter(logging.Filter):
    """A handler filter that scrubs every record, whichever library logged it."""

    def filter(self, record: logging.LogRecord) -> bool:
        _scrub_record(record)
        return True


#: The loggers whose records are scrubbed as they are made.
_OWN = ("crag", "crag_lab")


def _is_own(name: object) -> bool:
    """Whether a logger name is crag's. `logging.makeLogRecord` (structlog, socket
    handlers) makes its record with no name and sets one afterwards; any name that is
    not a string is nobody's."""
    return isinstance(name, str) and name.split(".", 1)[0] in _OWN


def scrub_logs() -> None:
    """Scrub every log record of crag's own loggers as it is made, whatever handlers the
    application uses (a failing server's message may quote the key it was sent). The
    factory serves every library's records: it must accept any shape and never raise."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "crag_scrubs", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if _is_own(getattr(record, "name", None)):
            _scrub_record(record)
        return record

    factory.crag_scrubs = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
