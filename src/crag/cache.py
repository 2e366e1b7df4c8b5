"""The answer cache: a tenant's confident answers, served again to the same question.

Only an answer crag is sure of is kept: verdict `correct`, answered, and verified
(`support == "supported"`); a refusal, a partial or corrected answer, an answer from the
web path, and one whose `confidence` (when the state has one) is below
`cache_min_confidence` never are. An entry records the tenant, the knobs the answer
depends on, the version of the tenant's library it came from and the format of its
result, so that it serves only the same tenant under the same settings, an ingest that
changes the library retires it, and so does a crag whose answers hold more (or other)
than the one that cached it.

A question is served from the cache when its embedding is within `cache_threshold` of a
cached question's and the two ask the same thing: the same years, dates, versions and
names (`grading.constraints`), the same words that turn a question ("not", "only",
"before"), and the same content words, where a word may be swapped only for a
near-synonym ("yearly" for "annual", not "monthly"). Embeddings alone rate
"the refund window for annual plans" and "... for monthly plans" as near-identical
(0.93 with MiniLM, above real paraphrases at 0.84): the rest of the question is the same.

The cache is one SQLite file in CRAG_HOME (`answers.sqlite`), next to the index: a few
thousand small rows scanned with numpy per lookup (well under a millisecond), eviction
and invalidation as plain SQL, transactions across processes, and nothing to rebuild
if it is lost. A cache that cannot be read or written is skipped with a warning: it
only ever saves time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from crag.context import KNOBS, Context
from crag.errors import CragError
from crag.grading.question_form import read
from crag.grading.registry import reads_trained, trained_path, without_llm
from crag.models.embeddings import embeddings_for
from crag.retrieval.tenancy import library_version
from crag.text import content_words, normalize, stem

log = logging.getLogger(__name__)

CACHE_FILE = "answers.sqlite"
#: Two words swapped between questions count as synonyms from this cosine similarity of
#: their embeddings (MiniLM: annual/yearly 0.82, buy/purchase 0.87; antonyms and
#: siblings lower: enable/disable 0.73, annual/monthly 0.57).
SYNONYM = 0.80
#: More swapped words than this is another question, however close the embeddings.
MAX_SWAPS = 3
#: Words that turn a question into another one though they are no content words
#: ("which plans do not include SSO", "what happens after it renews"): two questions
#: must hold the same of them.
_TURNING = re.compile(
    r"\b(?:no|not|nor|never|without|except|only|before|after|above|below|over|under|more"
    r"|most|less|least|fewer)\b|n't\b"
)
#: What of a run's state an entry keeps, and serves back.
KEPT = (
    "answer",
    "citations",
    "verdict",
    "support",
    "answered",
    "unsupported",
    "grader",
    "composite",
    "confidence",
    "conflicts",  # its answer names them: the result says which
)
#: What a cached result holds and how it reads; raised whenever a change to crag makes a
#: new answer differ from a cached one (its marks, its pages, a key in `KEPT`), so that
#: entries of an older crag are never served again.
RESULT_FORMAT = 2
#: The knobs that never change an answer once the library is fixed: where things are
#: kept, how long to wait and how many at once, how chunks are cut (the library's version
#: covers that), and the cache's own. Every other knob is part of an entry's key, so a
#: new knob is too unless it is named here.
_NOT_ANSWER_KNOBS = frozenset(
    {
        "home",
        "chunk_size",
        "chunk_overlap",
        "model_cache",
        "threads",
        "local_slots",
        "local_queue_timeout_s",
        "chat_timeout_s",
        "embeddings_timeout_s",
        "cache",
        "cache_threshold",
        "cache_size",
        "cache_min_confidence",
    }
)
#: The knobs an answer depends on (besides the library): an entry serves runs with the
#: same values only. The external sources are not among them (only the masking of what
#: is sent out): a `correct` verdict never searches.
ANSWER_KNOBS = tuple(
    name
    for name, spec in KNOBS.items()
    if name not in _NOT_ANSWER_KNOBS and (spec.group != "search" or name == "redact_queries")
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    id INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    scope TEXT NOT NULL,
    library TEXT NOT NULL,
    question TEXT NOT NULL,
    vector BLOB NOT NULL,
    result TEXT NOT NULL,
    stored REAL NOT NULL,
    used REAL NOT NULL,
    hits INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS answers_by_tenant ON answers (tenant, scope, library);
"""


@dataclass
class Hit:
    """A cached answer for a question: the earlier question, how close, and the answer."""

    question: str
    similarity: float
    result: dict[str, Any]


def worth_keeping(result: Mapping[str, Any], ctx: Context) -> bool:
    """Whether a run's result may be cached: a confident, verified answer only."""
    if result.get("verdict") != "correct" or result.get("answered") is not True:
        return False
    if result.get("support") != "supported" or result.get("unsupported"):
        return False
    confidence = result.get("confidence")
    return not (isinstance(confidence, float) and confidence < ctx.cache.min_confidence)


def scope(ctx: Context) -> str:
    """The knobs an answer depends on and the result's format, as one key (a retrained
    grader changes it too)."""
    knobs: dict[str, Any] = {name: ctx.get(name) for name in ANSWER_KNOBS}
    knobs["format"] = RESULT_FORMAT
    # the same model name served by another OpenAI-compatible server is another model
    knobs["openai_base_url"] = os.environ.get("OPENAI_BASE_URL")
    if reads_trained(ctx) or reads_trained(without_llm(ctx)):
        try:
            knobs["trained"] = trained_path(ctx).stat().st_mtime_ns
        except OSError:
            knobs["trained"] = None
    return hashlib.sha256(json.dumps(knobs, sort_keys=True, default=str).encode()).hexdigest()


def _unit(vector: Any) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


def _stems(question: str) -> dict[str, str]:
    """The question's content words by stem ("plans" and "plan" are one)."""
    return {stem(w): w for w in content_words(normalize(question))}


def _turning(question: str) -> list[str]:
    return sorted(_TURNING.findall(normalize(question).lower().replace("\u2019", "'")))


def same_question(asked: str, earlier: str, embedder: Embeddings) -> bool:
    """Whether two questions close in embedding ask the same: the same constraints, and
    the same content words but for near-synonyms swapped one for one. A word added or
    dropped narrows or widens the question ("... for annual plans"), so it does not."""
    if set(read(asked).constraints) != set(read(earlier).constraints):
        return False
    if _turning(asked) != _turning(earlier):
        return False
    mine, theirs = _stems(asked), _stems(earlier)
    only_mine = [mine[s] for s in sorted(mine.keys() - theirs.keys())]
    only_theirs = [theirs[s] for s in sorted(theirs.keys() - mine.keys())]
    if len(only_mine) != len(only_theirs) or len(only_mine) > MAX_SWAPS:
        return False
    if not only_mine:
        return True
    vectors = [_unit(v) for v in embedder.embed_documents([*only_mine, *only_theirs])]
    n = len(only_mine)
    sims = np.array([[float(vectors[i] @ vectors[n + j]) for j in range(n)] for i in range(n)])
    matched_mine: set[int] = set()
    matched_theirs: set[int] = set()
    for i, j in sorted(np.ndindex(n, n), key=lambda ij: -sims[ij]):
        if sims[i, j] >= SYNONYM and i not in matched_mine and j not in matched_theirs:
            matched_mine.add(i)
            matched_theirs.add(j)
    return len(matched_mine) == n


@contextmanager
def _database(ctx: Context, *, create: bool) -> Iterator[sqlite3.Connection | None]:
    """The cache file (None if there is none yet and `create` is off), in a transaction."""
    path = ctx.store.home / CACHE_FILE
    if not create and not path.is_file():
        yield None
        return
    with closing(sqlite3.connect(path, timeout=5.0)) as db:
        db.executescript(_SCHEMA)
        with db:  # one transaction: committed, or rolled back on an error
            yield db


def _unavailable(ctx: Context, exc: Exception) -> None:
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        log.warning(
            "the answer cache %s is busy in another process; answering without it this time",
            ctx.store.home / CACHE_FILE,
        )
        return
    log.warning(
        "the answer cache %s is unusable (%s: %s); answering without it (delete the file to "
        "start a new one)",
        ctx.store.home / CACHE_FILE,
        type(exc).__name__,
        " ".join(str(exc).split()),
    )


def version(ctx: Context) -> str | None:
    """The tenant's library version as a run starts: what its answer may be stored
    under (None: no library, or no cache)."""
    if not ctx.cache.enabled:
        return None
    try:
        return library_version(ctx, ctx.store.collection)
    except CragError as exc:  # no library, a store error: the retrieval reports it
        log.debug("answer cache skipped: %s", exc)
    except (OSError, ValueError) as exc:
        _unavailable(ctx, exc)
    return None


def lookup(ctx: Context, question: str, library: str | None) -> Hit | None:
    """The tenant's cached answer to `question` from the library at version `library`,
    if an earlier question asked the same. The rows are read without a write lock, and
    the question is embedded outside any transaction, so a slow embedder holds no other
    process up."""
    if not ctx.cache.enabled or library is None:
        return None
    try:
        tenant, key = ctx.store.tenant, scope(ctx)
        with _database(ctx, create=False) as db:
            if db is None:
                return None
            rows = db.execute(
                "SELECT id, question, vector, result FROM answers "
                "WHERE tenant = ? AND scope = ? AND library = ?",
                (tenant, key, library),
            ).fetchall()
        if not rows:
            return None
        embedder = embeddings_for(ctx)
        vector = _unit(embedder.embed_query(question))
        rows = [r for r in rows if len(r[2]) == vector.nbytes]  # a damaged row answers nothing
        if not rows:
            return None
        stored = np.stack([np.frombuffer(r[2], dtype=np.float32) for r in rows])
        sims = stored @ vector
        for i in np.argsort(-sims):
            if sims[i] < ctx.cache.threshold:
                break
            entry_id, earlier, _, result = rows[int(i)]
            try:
                answer = json.loads(result)
            except ValueError:
                continue
            if not isinstance(answer, dict):
                continue
            confidence = answer.get("confidence")
            if isinstance(confidence, float) and confidence < ctx.cache.min_confidence:
                continue  # kept under a lower bar than the run's
            if same_question(question, earlier, embedder):
                with _database(ctx, create=False) as db:
                    if db is not None:
                        db.execute(
                            "UPDATE answers SET used = ?, hits = hits + 1 WHERE id = ?",
                            (time.time(), entry_id),
                        )
                return Hit(earlier, round(float(sims[i]), 4), answer)
    except CragError as exc:
        log.debug("answer cache lookup skipped: %s", exc)
    except (sqlite3.Error, OSError, ValueError) as exc:
        _unavailable(ctx, exc)
    return None


def store(ctx: Context, question: str, result: Mapping[str, Any], library: str | None) -> bool:
    """Cache a run's answer to `question` if it is worth keeping and the library is still
    at `library`, the version the run started from (an ingest during the run would
    otherwise file an answer from the old library under the new one); True if it was."""
    if not ctx.cache.enabled or library is None or not worth_keeping(result, ctx):
        return False
    kept = {name: result[name] for name in KEPT if name in result}
    try:
        tenant, key = ctx.store.tenant, scope(ctx)
        if library_version(ctx, ctx.store.collection) != library:
            return False
        vector = _unit(embeddings_for(ctx).embed_query(question))
        now = time.time()
        with _database(ctx, create=True) as db:
            assert db is not None
            # entries from an older version of the tenant's library answer nothing now
            db.execute(
                "DELETE FROM answers WHERE tenant = ? AND scope = ? "
                "AND (library <> ? OR question = ?)",
                (tenant, key, library, question),
            )
            db.execute(
                "INSERT INTO answers (tenant, scope, library, question, vector, result, "
                "stored, used) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (tenant, key, library, question, vector.tobytes(), json.dumps(kept), now, now),
            )
            # the size bound, per tenant: the least recently used go first
            db.execute(
                "DELETE FROM answers WHERE tenant = ? AND id NOT IN (SELECT id FROM answers "
                "WHERE tenant = ? ORDER BY used DESC, id DESC LIMIT ?)",
                (tenant, tenant, ctx.cache.size),
            )
        return True
    except CragError as exc:
        log.debug("answer not cached: %s", exc)
    except (sqlite3.Error, OSError, ValueError) as exc:
        _unavailable(ctx, exc)
    return False


def entries(ctx: Context) -> int:
    """How many answers the tenant has cached (under any settings)."""
    try:
        with _database(ctx, create=False) as db:
            if db is None:
                return 0
            row = db.execute("SELECT COUNT(*) FROM answers WHERE tenant = ?", (ctx.store.tenant,))
            return int(row.fetchone()[0])
    except (sqlite3.Error, OSError) as exc:
        _unavailable(ctx, exc)
        return 0
