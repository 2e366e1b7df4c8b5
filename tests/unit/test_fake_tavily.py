"""The loopback Tavily fake against the real tavily-python clients (no network)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest
import requests
import tavily
from fake_tavily import DEFAULT_RESULTS, FakeTavily
from tavily import AsyncTavilyClient, TavilyClient
from tavily.errors import TimeoutError as TavilyTimeoutError

CANNED = [
    {
        "title": "Lumen 3.0 changelog",
        "url": "https://docs.halcyonlattice.example/changelog/3.0",
        "content": "The per-token rate limit rises from 120 to 300 requests per minute.",
        "score": 0.93,
        "raw_content": "# Lumen Server 3.0.0\n\nFull changelog text.",
    },
    {
        "title": "nginx in front of Lumen",
        "url": "https://forum.halcyonlattice.example/t/4182",
        "content": "Use proxy_read_timeout 3600s for the /sync WebSocket.",
        "score": 0.71,
    },
    {
        "title": "Pricing update",
        "url": "https://halcyonlattice.example/blog/pricing-2025",
        "content": "Team goes from USD 6 to USD 8 per user per month.",
    },
]


@pytest.fixture(autouse=True)
def _no_proxy_for_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    # requests and httpx both honour *_PROXY variables; loopback must never be proxied.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def fake() -> Iterator[FakeTavily]:
    with FakeTavily(results=CANNED, slow_s=5.0) as server:
        yield server


def test_server_binds_loopback_on_a_free_port(fake: FakeTavily) -> None:
    assert fake.base_url.startswith("http://127.0.0.1:")
    assert int(fake.base_url.rsplit(":", 1)[1]) > 0
    assert fake.search_url == fake.base_url + "/search"


def test_sync_client_gets_canned_results(fake: FakeTavily) -> None:
    client = TavilyClient(api_key="tvly-test", api_base_url=fake.base_url)
    response = client.search("How did the rate limit change in Lumen 3?", max_results=2)

    assert response["query"] == "How did the rate limit change in Lumen 3?"
    assert isinstance(response["response_time"], float)
    results = response["results"]
    assert [r["url"] for r in results] == [CANNED[0]["url"], CANNED[1]["url"]]
    for result in results:
        assert set(result) >= {"title", "url", "content", "score", "raw_content"}
    assert results[0]["score"] == 0.93
    assert results[0]["raw_content"] is None  # only sent when include_raw_content is asked

    (request,) = fake.requests
    assert request.method == "POST"
    assert request.path == "/search"
    assert request.api_key == "tvly-test"
    assert request.headers["Authorization"] == "Bearer tvly-test"
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["X-Client-Source"] == "tavily-python"
    assert request.body == {"query": "How did the rate limit change in Lumen 3?", "max_results": 2}
    assert fake.queries == ["How did the rate limit change in Lumen 3?"]


def test_default_max_results_and_raw_content(fake: FakeTavily) -> None:
    client = TavilyClient(api_key="tvly-test", api_base_url=fake.base_url)
    response = client.search("nginx websocket", include_raw_content=True)
    results = response["results"]
    assert len(results) == len(CANNED)
    assert results[0]["raw_content"].startswith("# Lumen Server 3.0.0")
    assert results[1]["raw_content"] == CANNED[1]["content"]  # falls back to content
    assert 0 < results[2]["score"] <= 1  # filled in when the canned result has none
    assert fake.requests[0].body["include_raw_content"] is True


def test_async_client_gets_canned_results(fake: FakeTavily) -> None:
    async def go() -> dict:
        async with AsyncTavilyClient(api_key="tvly-test", api_base_url=fake.base_url) as client:
            return await client.search("lumen pricing", max_results=3, timeout=5)

    response = asyncio.run(go())
    assert response["query"] == "lumen pricing"
    assert [r["title"] for r in response["results"]] == [r["title"] for r in CANNED]
    (request,) = fake.requests
    assert request.path == "/search"
    assert request.api_key == "tvly-test"
    assert request.body["max_results"] == 3


def test_api_key_in_body_is_accepted() -> None:
    with FakeTavily(api_key="tvly-body") as fake:
        ok = httpx.post(
            fake.search_url, json={"api_key": "tvly-body", "query": "q", "max_results": 1}
        )
        assert ok.status_code == 200
        assert ok.json()["results"][0]["title"] == DEFAULT_RESULTS[0]["title"]
        bad = httpx.post(fake.search_url, json={"api_key": "tvly-wrong", "query": "q"})
        assert bad.status_code == 401
        assert [r.api_key for r in fake.requests] == ["tvly-body", "tvly-wrong"]


def test_wrong_key_is_invalid_api_key_error() -> None:
    with FakeTavily(api_key="tvly-right") as fake:
        client = TavilyClient(api_key="tvly-test", api_base_url=fake.base_url)
        with pytest.raises(tavily.InvalidAPIKeyError):
            client.search("q")


def test_unknown_path_is_404(fake: FakeTavily) -> None:
    response = httpx.post(fake.base_url + "/extract", json={"urls": ["https://x.example"]})
    assert response.status_code == 404
    assert fake.requests[-1].path == "/extract"


def test_error500_raises(fake: FakeTavily) -> None:
    fake.mode = "error500"
    client = TavilyClient(api_key="tvly-test", api_base_url=fake.base_url)
    with pytest.raises(requests.HTTPError) as info:
        client.search("q")
    assert info.value.response.status_code == 500

    async def go() -> None:
        async with AsyncTavilyClient(api_key="tvly-test", api_base_url=fake.base_url) as client:
            await client.search("q")

    with pytest.raises(httpx.HTTPStatusError) as ainfo:
        asyncio.run(go())
    assert ainfo.value.response.status_code == 500
    assert len(fake.requests) == 2


def test_ratelimit_raises_usage_limit_exceeded(fake: FakeTavily) -> None:
    fake.mode = "ratelimit"
    client = TavilyClient(api_key="tvly-test", api_base_url=fake.base_url)
    with pytest.raises(tavily.UsageLimitExceededError, match="Rate limit exceeded"):
        client.search("q")

    async def go() -> None:
        async with AsyncTavilyClient(api_key="tvly-test", api_base_url=fake.base_url) as client:
            await client.search("q")

    with pytest.raises(tavily.UsageLimitExceededError):
        asyncio.run(go())

    raw = httpx.post(fake.search_url, json={"query": "q"})
    assert raw.status_code == 429
    assert raw.headers["Retry-After"] == str(fake.retry_after_s)


def test_slow_times_out_on_the_client(fake: FakeTavily) -> None:
    fake.mode = "slow"
    client = TavilyClient(api_key="tvly-test", api_base_url=fake.base_url)
    started = time.monotonic()
    with pytest.raises(TavilyTimeoutError):
        client.search("q", timeout=0.3)

    async def go() -> None:
        async with AsyncTavilyClient(api_key="tvly-test", api_base_url=fake.base_url) as client:
            await client.search("q", timeout=0.3)

    with pytest.raises(TavilyTimeoutError):
        asyncio.run(go())
    assert time.monotonic() - started < fake.slow_s  # the clients gave up, not the server
    assert len(fake.requests) == 2


def test_mode_switch_back_to_ok_and_reset(fake: FakeTavily) -> None:
    client = TavilyClient(api_key="tvly-test", api_base_url=fake.base_url)
    fake.mode = "ratelimit"
    with pytest.raises(tavily.UsageLimitExceededError):
        client.search("first")
    fake.reset()
    assert fake.requests == [] and fake.mode == "ok"
    assert client.search("second", max_results=1)["results"][0]["url"] == CANNED[0]["url"]
    assert fake.queries == ["second"]


def test_results_may_depend_on_the_query() -> None:
    def pick(body: dict) -> list[dict]:
        return [r for r in CANNED if body["query"].lower() in r["content"].lower()]

    with FakeTavily(results=pick) as fake:
        client = TavilyClient(api_key="tvly-test", api_base_url=fake.base_url)
        hits = client.search("websocket")["results"]
        assert [r["title"] for r in hits] == ["nginx in front of Lumen"]
        assert client.search("nothing matches this")["results"] == []


def test_stop_is_prompt_even_while_a_slow_request_waits() -> None:
    fake = FakeTavily(mode="slow", slow_s=30).start()
    client = TavilyClient(api_key="tvly-test", api_base_url=fake.base_url)
    with pytest.raises(TavilyTimeoutError):
        client.search("q", timeout=0.2)
    started = time.monotonic()
    fake.stop()
    assert time.monotonic() - started < 3
    fake.stop()  # idempotent


def test_bad_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        FakeTavily(mode="down")  # type: ignore[arg-type]
