"""Local servers for tests: processes started until they answer, and loopback HTTP servers
that answer as a test says (shared by server tests)."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(
    command: list[str],
    probe_url: str,
    log_path: Path,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 60,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `command` (in a session of its own) until the block ends, yielding its process;
    fail the test if `probe_url` never answers 200."""
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    with urllib.request.urlopen(probe_url, timeout=2) as response:
                        if response.status == 200:
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    output = log_path.read_text(errors="replace")[-3000:]
                    pytest.fail(f"{command[0]} did not start ({probe_url}):\n{output}")
                time.sleep(0.3)
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def chroma_server(data: Path) -> Iterator[str]:
    """`chroma run` on a loopback port, keeping its data in `data`; yields its URL."""
    from requires import CORE, require_command

    exe = require_command("chroma", CORE)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [str(exe), "run", "--path", str(data / "db"), "--host", "127.0.0.1"]
    with serving([*command, "--port", str(port)], f"{url}/api/v2/heartbeat", data / "server.log"):
        yield url


Respond = Callable[[BaseHTTPRequestHandler], tuple[int, bytes] | None]


@contextmanager
def raw_server(respond: Respond) -> Iterator[str]:
    """A loopback HTTP server answering every POST with `respond(handler)`: (status, body),
    or None when it already hung up (the request's body is `handler.body`). Yields its
    base URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            answer = respond(self)
            if answer is None:
                return
            status, body = answer
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the client gave up first

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.block_on_close = False
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
