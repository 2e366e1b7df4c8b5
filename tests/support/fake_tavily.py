"""A loopback stand-in for the Tavily search API, for tests that must not touch the network.

`FakeTavily` runs a stdlib `http.server` on 127.0.0.1 (port 0, so the OS picks a free
port) in a background thread and answers the one call crag makes, ``POST /search``, in
the shape tavily-python 0.8.5 expects::

    {"query": ..., "follow_up_questions": null, "answer": null, "images": [],
     "results": [{"title", "url", "content", "score", "raw_content"}, ...],
     "response_time": 0.01, "request_id": "fake-1"}

How the real clients call it (read from tavily-python 0.8.5): both `TavilyClient`
(requests) and `AsyncTavilyClient` (httpx) POST ``api_base_url + "/search"`` with the
JSON body ``{"query": ..., "max_results": ..., ...}`` (``None`` arguments dropped) and
the headers ``Content-Type: application/json``, ``Authorization: Bearer <api_key>`` and
``X-Client-Source: tavily-python``. Errors are read from ``{"detail": {"error": msg}}``:
429 becomes ``tavily.UsageLimitExceededError(msg)``, 401 ``tavily.InvalidAPIKeyError``,
400 ``tavily.BadRequestError``, 403/432/433 ``tavily.errors.ForbiddenError``, anything
else ``raise_for_status()`` (``requests.HTTPError`` / ``httpx.HTTPStatusError``); a
client-side timeout becomes ``tavily.errors.TimeoutError``. The key may also be sent in
the body as ``api_key`` (older clients and hand-rolled callers do that); both are read.

Modes (set ``fake.mode`` at any time; it applies to the next request):

* ``"ok"``: 200 with the canned results (the first ``max_results``, default 5);
* ``"error500"``: 500 with ``{"detail": {"error": ...}}``;
* ``"slow"``: waits ``slow_s`` seconds (longer than a short client timeout), then
  answers as ``ok``; `stop()` cuts the wait short so a test never hangs;
* ``"ratelimit"``: 429 with ``Retry-After`` and ``{"detail": {"error": ...}}``.

If ``api_key`` is given, a request carrying another key (or none) gets 401.

Usage::

    with FakeTavily(results=[{"title": "t", "url": "https://x.example", "content": "c"}]) as fake:
        client = TavilyClient(api_key="tvly-test", api_base_url=fake.base_url)
        client.search("q", max_results=3)
        assert fake.requests[-1].body["query"] == "q"
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Mode = Literal["ok", "error500", "slow", "ratelimit"]
MODES: tuple[str, ...] = ("ok", "error500", "slow", "ratelimit")

#: Results used when none are given: three fictional pages about the sample product.
DEFAULT_RESULTS: list[dict[str, Any]] = [
    {
        "title": "Lumen Server 3.0.0 changelog",
        "url": "https://docs.halcyonlattice.example/changelog/3.0",
        "content": "Lumen 3.0 raises the per-token API rate limit from 120 to 300 requests "
        "per minute and the burst from 30 to 60.",
        "score": 0.91,
    },
    {
        "title": "Running Lumen behind an nginx reverse proxy",
        "url": "https://forum.halcyonlattice.example/t/lumen-behind-nginx-reverse-proxy/4182",
        "content": "Set proxy_read_timeout 3600s on the /sync location, otherwise nginx "
        "closes the idle WebSocket after 60 seconds.",
        "score": 0.74,
    },
    {
        "title": "Lumen pricing changes from 1 February 2025",
        "url": "https://halcyonlattice.example/blog/pricing-2025",
        "content": "The Team plan moves from USD 6 to USD 8 per user per month.",
        "score": 0.52,
    },
]

ResultSource = Iterable[Mapping[str, Any]] | Callable[[dict[str, Any]], Iterable[Mapping[str, Any]]]


@dataclass
class RecordedRequest:
    """One request the fake received (also those it answered with an error)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text if it was not JSON, or None if empty
    api_key: str | None  # from ``Authorization: Bearer ...`` or the body's ``api_key``
    received_at: float = field(default_factory=time.monotonic)

    @property
    def query(self) -> str | None:
        return self.body.get("query") if isinstance(self.body, dict) else None


def _normalise(result: Mapping[str, Any], rank: int, include_raw: bool) -> dict[str, Any]:
    """Fill the fields a Tavily result always has."""
    out = {
        "title": result.get("title", f"Result {rank + 1}"),
        "url": result.get("url", f"https://example.com/fake/{rank + 1}"),
        "content": result.get("content", ""),
        "score": float(result.get("score", round(max(0.05, 0.9 - 0.1 * rank), 4))),
        "raw_content": None,
    }
    if include_raw:
        out["raw_content"] = result.get("raw_content") or out["content"]
    for optional in ("favicon", "published_date"):  # the latter on news results
        if optional in result:
            out[optional] = result[optional]
    return out


class FakeTavily:
    """A Tavily-shaped HTTP server on 127.0.0.1 with canned results and switchable failures.

    Attributes:
        base_url: ``http://127.0.0.1:<port>`` (pass as ``api_base_url``); set once started.
        requests: every request received, oldest first (`RecordedRequest`).
        mode: ``"ok"``, ``"error500"``, ``"slow"`` or ``"ratelimit"``; may be changed live.
        results: the canned results (a list of dicts, or ``f(body) -> list``).
        slow_s: how long ``"slow"`` waits before answering.
        api_key: if set, the only key accepted (others get 401).
    """

    def __init__(
        self,
        results: ResultSource | None = None,
        *,
        mode: Mode = "ok",
        slow_s: float = 5.0,
        api_key: str | None = None,
        retry_after_s: int = 7,
        response_time: float = 0.01,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.results: ResultSource = DEFAULT_RESULTS if results is None else results
        self.mode: Mode = mode
        self.slow_s = slow_s
        self.api_key = api_key
        self.retry_after_s = retry_after_s
        self.response_time = response_time
        self.requests: list[RecordedRequest] = []
        self.base_url: str = ""
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------
    def start(self) -> FakeTavily:
        if self._server is not None:
            return self
        self._stopping.clear()
        server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        server.daemon_threads = True
        server.block_on_close = False  # a "slow" handler must not hold up stop()
        self._server = server
        host, port = server.server_address[:2]
        self.base_url = f"http://{host}:{port}"
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.name = f"FakeTavily:{port}"
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()  # wakes any handler sleeping in "slow" mode
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeTavily:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- helpers for tests ------------------------------------------------------------
    @property
    def search_url(self) -> str:
        return self.base_url + "/search"

    @property
    def queries(self) -> list[str | None]:
        """The ``query`` of every recorded request, in order."""
        return [r.query for r in self.requests]

    def reset(self, mode: Mode = "ok") -> None:
        """Forget recorded requests and set the mode (default ``"ok"``)."""
        with self._lock:
            self.requests.clear()
        self.mode = mode

    # --- request handling ---------------------------------------------------------------
    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _canned(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        source = self.results
        raw = source(body) if callable(source) else source
        try:
            limit = int(body.get("max_results") or 5)
        except (TypeError, ValueError):
            limit = 5
        include_raw = bool(body.get("include_raw_content"))
        return [_normalise(r, i, include_raw) for i, r in enumerate(list(raw)[: max(0, limit)])]

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "FakeTavily/1.0"
            protocol_version = "HTTP/1.0"  # one request per connection: nothing lingers

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _send_json(
                self, status: int, payload: Any, extra: Mapping[str, str] | None = None
            ) -> None:
                data = json.dumps(payload).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (extra or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (e.g. its timeout fired in "slow" mode)

            def _read(self) -> RecordedRequest:
                length = int(self.headers.get("Content-Length") or 0)
                text = self.rfile.read(length).decode("utf-8", "replace") if length else ""
                body: Any = None
                if text:
                    try:
                        body = json.loads(text)
                    except json.JSONDecodeError:
                        body = text
                key = None
                auth = self.headers.get("Authorization", "")
                if auth.lower().startswith("bearer "):
                    key = auth[7:].strip() or None
                if key is None and isinstance(body, dict) and body.get("api_key"):
                    key = str(body["api_key"])
                request = RecordedRequest(
                    method=self.command,
                    path=self.path,
                    headers={k: v for k, v in self.headers.items()},
                    body=body,
                    api_key=key,
                )
                fake._record(request)
                return request

            def do_GET(self) -> None:
                self._read()
                self._send_json(405, {"detail": {"error": "Method Not Allowed"}})

            def do_POST(self) -> None:
                started = time.monotonic()
                request = self._read()
                if request.path.split("?", 1)[0].rstrip("/") != "/search":
                    self._send_json(404, {"detail": {"error": f"Not Found: {request.path}"}})
                    return
                if fake.api_key is not None and request.api_key != fake.api_key:
                    self._send_json(
                        401, {"detail": {"error": "Unauthorized: missing or invalid API key."}}
                    )
                    return
                if not isinstance(request.body, dict) or not request.body.get("query"):
                    self._send_json(400, {"detail": {"error": "query is required"}})
                    return
                mode = fake.mode
                if mode == "error500":
                    self._send_json(500, {"detail": {"error": "Internal Server Error (fake)"}})
                    return
                if mode == "ratelimit":
                    self._send_json(
                        429,
                        {"detail": {"error": "Rate limit exceeded (fake). Slow down."}},
                        {"Retry-After": str(fake.retry_after_s)},
                    )
                    return
                if mode == "slow" and fake._stopping.wait(fake.slow_s):
                    return  # stopping: drop the connection without an answer
                body = request.body
                payload = {
                    "query": body["query"],
                    "follow_up_questions": None,
                    "answer": None,
                    "images": [],
                    "results": fake._canned(body),
                    "response_time": round(fake.response_time + (time.monotonic() - started), 4),
                    "request_id": f"fake-{len(fake.requests)}",
                }
                self._send_json(200, payload)

        return Handler
