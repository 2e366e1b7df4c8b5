"""Secrets and personal data never leave in an outgoing query; ordinary questions
pass unchanged."""

from __future__ import annotations

import logging
import sys

import pytest

from crag.redact import _PATTERNS, SecretFilter, collecting, masked, redact, scrub

SECRETS = [
    ("write to jane.doe@example.com about it", "email"),
    ("cc: a.b+tag@mail.example.co.uk", "email"),
    ("my key is sk-abcdefghijklmnopqrstuvwxyz012345", "api key"),
    ("OPENAI_API_KEY=sk-proj-AbCdEfGhIjKlMnOpQrStUvWx12", "api key"),
    ("anthropic sk-ant-api03-abcdefghijklmnop1234", "api key"),
    ("tavily tvly-AbCdEfGhIjKlMnOp1234", "api key"),
    ("tvly-dev-0123456789abcdefABCD", "api key"),
    ("github ghp_1234567890abcdefghijABCDEFGHIJ123456", "api key"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "api key"),
    ("slack xoxb-123456789012-abcdefghijkl", "api key"),
    ("aws AKIAIOSFODNN7EXAMPLE key", "api key"),
    ("google AIzaSyD-abcdefghijklmnopqrstuvwxyz12345", "api key"),
    ("stripe sk_live_abcdefghijklmnop12345678", "api key"),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9P",
        "token",
    ),
    ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345", "token"),
    ("secret 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "secret"),
    ("hex 0123456789abcdef0123456789abcdef", "secret"),
    ("base64 QWxhZGRpbjpvcGVuIHNlc2FtZQ8xYTJiM2M0ZDVlNmY3ZzhoOWk", "secret"),
    ("card 4111 1111 1111 1111 expires soon", "card number"),
    ("card 5500-0000-0000-0004", "card number"),
    ("amex 378282246310005", "card number"),
    ("call me on +44 20 7946 0958", "phone"),
    ("phone (555) 123-4567", "phone"),
    ("tel 555-123-4567", "phone"),
    ("+1 415 555 2671 is my number", "phone"),
    ("ring 030 1234 5678", "phone"),
    ("see /home/alice/notes/plan.pdf", "path"),
    ("my file /Users/bob/Documents/contract.docx", "path"),
    (r"open C:\Users\carol\Desktop\report.pdf", "path"),
    ("the key is in ~/secrets/key.pem", "path"),
    ("email ops@halcyonlattice.example and key sk-abcdefghijklmnop1234", "email"),
    ("reach me at john_smith99@uni-example.org", "email"),
    ("github app ghs_abcdefghijklmnopqrstuvwxyz0123456789", "api key"),
    ("restricted rk_test_abcdefghijklmnop1234", "api key"),
    ("session ASIAABCDEFGHIJKLMNOP in the logs", "api key"),
    ("visa 4012888888881881", "card number"),
    ("Berlin office +49 30 123456789", "phone"),
]

HARMLESS = [
    "What is the bias-variance trade-off?",
    "How did the Lumen API rate limit change in version 3?",
    "What does the Team plan cost per user per month?",
    "Which TCP port does the Lumen server listen on by default?",
    "What changed in Python 3.11.2?",
    "Who won the 2023 Nobel Prize in Physics?",
    "How many requests per minute (120 or 300) does a token get?",
    "What is the difference between batch normalization and layer normalization?",
    "When was scikit-learn 1.5 released?",
    "What does the learning_curve function in sklearn.model_selection return?",
    "How long do I have to ask for a full refund of an annual subscription?",
    "What is ISBN 978-0-262-03561-3 about?",
    "Explain the Adam optimizer's beta1 and beta2.",
    "What is the GDP of France in 2022?",
    "How do I set listen_port in /etc/lumen/lumen.toml?",
    "What does HTTP status 429 mean?",
    "What is the time complexity of quicksort, O(n log n)?",
    "Which movie won Best Picture at the 90th Academy Awards?",
    "How does dropout with p = 0.5 regularize a network?",
    "What is the price of the Enterprise plan in USD?",
    "How do I configure nginx proxy_read_timeout 3600s?",
    "What were Tesla's revenues in Q3 2023?",
    "What is a 32-bit float's precision?",
    "Is 1e-4 a good learning rate for AdamW?",
    "What does RFC 3339 say about timestamps?",
    "How big is a 1024x768 image in bytes at 24 bits?",
    "What is the capital of Australia?",
    "Compare GPT-3 and GPT-4 on MMLU.",
    "What does version 2 of the API under /api/v2/ support?",
    "How many seats does the Business plan allow, 5 or 50?",
    "What is the SHA-256 of an empty file?",
    "How does Git store commits?",
    "How many days are in a leap year, 366?",
    "What was the population of Tokyo in 2020?",
    "Is Python 3.12 faster than 3.11?",
    "What happened on 1998-05-12 in Paris?",  # a date: digits and hyphens, no phone
    "Who met on 2023-05-01 10:30 in Geneva?",
    "Which release shipped on 05-11-2024?",
    "What is the ASIA_PACIFIC_REVENUE column?",  # a name, not an AWS key
    "Is sk-learn-compatible-estimator a thing?",
]


@pytest.mark.parametrize(("text", "kind"), SECRETS)
def test_secrets_and_personal_data_are_masked(text: str, kind: str) -> None:
    out = redact(text)
    assert kind in out.removed and f"[{kind}]" in out.text
    for word in text.split():
        if len(word) >= 12 and any(ch.isdigit() for ch in word):
            assert word not in out.text  # no long secret-like word survives


@pytest.mark.parametrize("question", HARMLESS)
def test_ordinary_questions_pass_unchanged(question: str) -> None:
    out = redact(question)
    assert (out.text, out.removed) == (question, [])


def test_a_query_is_written_without_the_placeholders() -> None:
    out = redact("Reply to jane.doe@example.com about the refund, or call 555-123-4567")
    assert out.text == "Reply to [email] about the refund, or call [phone]"
    assert out.bare == "Reply to about the refund, or call"


def test_only_the_kinds_are_recorded_never_the_values() -> None:
    out = redact("mail a@b.example or c@d.example, key sk-abcdefghijklmnop1234")
    assert out.removed == ["email", "api key"]
    assert "a@b" not in repr(out) and "sk-" not in repr(out)


@pytest.mark.parametrize(
    "filler",
    ["x" * 100_000, "1 " * 50_000, "-" * 100_000, "ab@" * 33_333, "12 345-678 " * 9_000],
    ids=["letters", "digits", "hyphens", "at signs", "number groups"],
)
def test_secrets_inside_long_runs_of_near_matches_are_still_removed(filler: str) -> None:
    """Long runs of near-matches neither hide a secret nor lose the text around them."""
    assert redact(filler).text == filler  # no secret in the filler alone
    text = f"{filler} mail jane.doe@example.com {filler} key sk-abcdefghijklmnop1234 {filler}"
    out = redact(text)
    assert "jane.doe@example.com" not in out.text and "sk-abcdefghijklmnop1234" not in out.text
    assert out.text.count("[email]") == 1 and out.text.count("[api key]") == 1
    assert {"email", "api key"} <= set(out.removed)
    assert out.text.startswith(filler[:1000]) and out.text.endswith(filler[-1000:])


def test_every_kind_of_pattern_has_a_case() -> None:
    """A pattern added without a case here would go untested."""
    assert {kind for kind, _ in _PATTERNS} == {kind for _, kind in SECRETS}


def test_masked_notes_the_kinds_for_the_running_node() -> None:
    with collecting() as kinds:
        sent = masked("mail jane.doe@example.com the key sk-abcdefghijklmnop1234")
        masked("and again jane.doe@example.com")
    assert "jane.doe" not in sent and "sk-abc" not in sent
    assert kinds == ["email", "api key"]
    assert masked("nothing to mask here") == "nothing to mask here"  # outside: no record


def test_scrub_removes_the_values_of_secret_environment_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "plainlookingvalue42")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-abcdefghijklmnop0123")
    monkeypatch.setenv("CRAG_K", "12345678")  # not a secret's name: kept
    text = "401: key sk-test-abcdefghijklmnop0123 refused; token plainlookingvalue42; k 12345678"
    out = scrub(text)
    assert "sk-test-abcdefghijklmnop0123" not in out and "plainlookingvalue42" not in out
    assert out.count("[secret]") == 2 and "12345678" in out
    # shaped like a key but not in the environment: removed from errors, kept in answers
    other = "a key like tvly-AbCdEfGhIjKlMnOp1234"
    assert "tvly-" not in scrub(other) and scrub(other, shapes=False) == other


def test_log_records_are_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-secretvalue0123456789")
    record = logging.LogRecord(
        "crag",
        logging.WARNING,
        __file__,
        1,
        "search failed: %s",
        ("bad key tvly-secretvalue0123456789",),
        None,
    )
    assert SecretFilter().filter(record)
    assert "secretvalue" not in record.getMessage() and "[secret]" in record.getMessage()


# --- the log-record factory serves every library's records ------------------------------------

SECRET = "tvly-secretvalue0123456789"


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TAVILY_API_KEY", SECRET)
    return SECRET


def test_importing_crag_installs_the_factory() -> None:
    assert getattr(logging.getLogRecordFactory(), "crag_scrubs", False)


def test_crag_loggers_are_scrubbed_as_records_are_made(key: str) -> None:
    for name in ("crag", "crag.nodes.web_search", "crag_lab.cli"):
        record = logging.getLogger(name).makeRecord(
            name, logging.WARNING, __file__, 1, "search failed: %s", (f"bad key {key}",), None
        )
        assert record.getMessage() == "search failed: bad key [secret]" and record.args == ()


def test_other_loggers_records_are_left_as_made(key: str) -> None:
    record = logging.getLogger("cragx").makeRecord(
        "cragx", logging.WARNING, __file__, 1, "sent %s", (key,), None
    )
    assert record.msg == "sent %s" and record.args == (key,)


@pytest.mark.parametrize("name", [None, 42, b"crag", ("crag",)])
def test_records_with_names_that_are_not_strings_are_made(name: object) -> None:
    factory = logging.getLogRecordFactory()
    record = factory(name, logging.INFO, "", 0, "hello %s", ("world",), None)
    assert record.name is name and record.getMessage() == "hello world"


def test_make_log_record_works_as_structlog_calls_it() -> None:
    """`logging.makeLogRecord` makes its record with no name, then sets the fields."""
    record = logging.makeLogRecord(
        {"name": "langgraph_api.worker", "msg": "Background run succeeded", "levelno": 20}
    )
    assert record.name == "langgraph_api.worker"
    assert record.getMessage() == "Background run succeeded"


def test_a_crag_record_with_arguments_that_do_not_fit_still_logs(key: str) -> None:
    record = logging.getLogger("crag").makeRecord(
        "crag", logging.WARNING, __file__, 1, "%d requests with %s", ("many", key), None
    )
    message = record.getMessage()
    assert key not in message and "%d requests" in message and "many" in message


def test_a_crag_traceback_is_scrubbed(key: str) -> None:
    try:
        raise RuntimeError(f"401 for key {key}")
    except RuntimeError:
        record = logging.getLogger("crag").makeRecord(
            "crag", logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
        )
    assert record.exc_text and "RuntimeError: 401 for key [secret]" in record.exc_text
    assert key not in logging.Formatter().format(record)


def test_a_record_that_cannot_be_read_loses_its_text_not_the_log(key: str) -> None:
    class Unprintable:
        def __str__(self) -> str:
            raise ValueError("no text")

    record = logging.getLogger("crag").makeRecord(
        "crag", logging.WARNING, __file__, 1, Unprintable(), (key,), None
    )
    assert key not in record.getMessage()
    bad_exc = logging.LogRecord("crag", logging.ERROR, "", 0, f"key {key}", (), True)  # type: ignore[arg-type]
    assert SecretFilter().filter(bad_exc) and key not in bad_exc.getMessage()


def test_a_handler_prints_every_shape_without_a_logging_error(
    key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `langgraph dev` does: structlog's records, crag's and other libraries', all
    through one stream handler; none may end in `--- Logging error ---`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    records = [
        logging.makeLogRecord({"name": "langgraph_api.worker", "msg": "run succeeded"}),
        logging.makeLogRecord({"msg": "no name at all"}),
        logging.getLogger("crag.api").makeRecord(
            "crag.api", logging.WARNING, "", 0, "key %s", (key,), None
        ),
        logging.getLogger("crag").makeRecord("crag", logging.WARNING, "", 0, "%d", ("x",), None),
    ]
    for record in records:
        handler.handle(record)
    err = capsys.readouterr().err
    assert "Logging error" not in err and "Traceback" not in err and key not in err
    assert "langgraph_api.worker run succeeded" in err and "crag.api key [secret]" in err
