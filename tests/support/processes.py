"""Start a local server for a test and wait until it answers (shared by server tests)."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

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
) -> Iterator[None]:
    """Run `command` until the block ends; fail the test if `probe_url` never answers 200."""
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
            yield
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
    import shutil
    import sys

    exe = Path(sys.executable).with_name("chroma")
    if not exe.exists():
        found = shutil.which("chroma")
        if found is None:
            pytest.skip("the `chroma` command (chromadb's server) is not installed")
        exe = Path(found)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [str(exe), "run", "--path", str(data / "db"), "--host", "127.0.0.1"]
    with serving([*command, "--port", str(port)], f"{url}/api/v2/heartbeat", data / "server.log"):
        yield url
