"""crag's Tavily source (`crag.retrieval.external.TavilySearch`, through tavily-python's
real async client) against a Tavily-shaped server on loopback: what it sends, how it
reads results into passages, and that each failure is one line within its timeout.
(The whole web path on these failures is tests/reliability/test_faults.py.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fake_tavily import FakeTavily

from crag.context import Context
from crag.errors import ProviderError, SearchError
from crag.retrieval.external import TavilySearch, make_source

KEY = "tvly-sourcetest0123456789abcdef"
RESULTS: list[dict[str, Any]] = [
    {
        "title": "Lumen 3.0 changelog",
        "url": "https://docs.halcyonlattice.example/changelog/3.0",
        "content": "The per-token rate limit rises from 120 to 300 requests per minute.",
        "score": 0.93,
        "published_date": "2025-01-14",
    },
    {
        "title": "",
        "url": "https://forum.halcyonlattice.example/t/4182",
        "content": "Jan 3, 2025 ... Use proxy_read_timeout 3600s for the /sync WebSocket.",
        "score": 7,
    },
    {"title": "Empty page", "url": "https://halcyonlattice.example/empty", "content": "  "},
    {"title": "Fourth", "url": "https://halcyonlattice.example/4", "content": "More text."},
]


@pytest.fixture(autouse=True)
def _no_proxy_for_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def fake() -> Iterator[FakeTavily]:
    with FakeTavily(results=RESULTS, slow_s=10.0, api_key=KEY) as server:
        yield server


def search(fake: FakeTavily, queries: list[str], k: int = 3, timeout_s: float = 5) -> list[Any]:
    source = TavilySearch(KEY, fake.base_url, timeout_s)
    return asyncio.run(source.asearch(queries, k))


def test_the_first_query_goes_with_the_key_and_k_as_max_results(fake: FakeTavily) -> None:
    search(fake, ["lumen rate limit 3.0", "How did the rate limit change?"], k=3)
    (request,) = fake.requests
    assert request.path == "/search" and request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.body["query"] == "lumen rate limit 3.0" and request.body["max_results"] == 3


def test_each_result_is_a_passage_to_cite(fake: FakeTavily) -> None:
    first, second = search(fake, ["lumen"], k=3)  # the third result is empty: dropped
    assert first["origin"] == "external" and first["id"] == f"web:{RESULTS[0]['url']}"
    assert (first["title"], first["source"], first["url"]) == (
        "Lumen 3.0 changelog",
        "Lumen 3.0 changelog",
        RESULTS[0]["url"],
    )
    assert first["text"] == RESULTS[0]["content"] and first["similarity"] == 0.93
    assert first["published"] == "2025-01-14"  # the result's own date
    assert second["title"] == second["source"] == RESULTS[1]["url"]  # no title: the URL
    assert second["similarity"] == 1.0  # a score out of range is clipped
    assert second["text"].startswith("Use proxy_read_timeout")  # the snippet's date is
    assert second["published"]  # read off its text as the page's date


def test_no_more_than_k_results_are_read(fake: FakeTavily) -> None:
    fake.results = RESULTS[:1] * 6
    assert len(search(fake, ["lumen"], k=2)) == 2


def test_no_results_is_an_answer_not_an_error(fake: FakeTavily) -> None:
    fake.results = []
    assert search(fake, ["nothing matches"]) == []


@pytest.mark.parametrize(
    ("mode", "said"),
    [("error500", "tavily: HTTPStatusError"), ("ratelimit", "tavily: UsageLimitExceededError")],
)
def test_a_failing_service_is_one_line_without_the_key(
    fake: FakeTavily, mode: str, said: str
) -> None:
    fake.mode = mode  # type: ignore[assignment]
    with pytest.raises(SearchError) as info:
        search(fake, ["q"])
    message = str(info.value)
    assert message.startswith(said) and "\n" not in message and KEY not in message


def test_a_refused_key_is_one_line_without_the_key(fake: FakeTavily) -> None:
    source = TavilySearch("tvly-wrongkey0123456789abcdef", fake.base_url, 5)
    with pytest.raises(SearchError, match=r"^tavily: InvalidAPIKeyError") as info:
        asyncio.run(source.asearch(["q"], 3))
    assert "tvly-wrongkey" not in str(info.value)


def test_each_search_closes_its_client(fake: FakeTavily, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client left open keeps its connections until a garbage collection: a long-lived
    server would pile them up."""
    from tavily import AsyncTavilyClient

    closed: list[object] = []
    real_close = AsyncTavilyClient.close

    async def close(self: AsyncTavilyClient) -> None:
        closed.append(self)
        await real_close(self)

    monkeypatch.setattr(AsyncTavilyClient, "close", close)
    search(fake, ["lumen"])
    fake.mode = "error500"
    with pytest.raises(SearchError):
        search(fake, ["lumen"])
    assert len(set(map(id, closed))) == 2


def test_a_slow_service_fails_at_the_timeout(fake: FakeTavily) -> None:
    fake.mode = "slow"
    started = time.monotonic()
    with pytest.raises(SearchError, match=r"^tavily: "):
        search(fake, ["q"], timeout_s=0.5)
    assert time.monotonic() - started < 0.5 + 1 + 1  # the timeout and its grace, not 10 s


def test_tavily_without_a_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="TAVILY_API_KEY"):
        make_source(Context(external="tavily"), "tavily")


def test_the_configured_source_reads_key_base_url_and_timeout(
    fake: FakeTavily, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", KEY)
    source = make_source(Context(tavily_base_url=fake.base_url, timeout_s=3), "tavily")
    assert isinstance(source, TavilySearch) and source.leaves_machine
    assert (source.base_url, source.timeout_s) == (fake.base_url, 3)
    assert asyncio.run(source.asearch(["lumen"], 1))[0]["url"] == RESULTS[0]["url"]
