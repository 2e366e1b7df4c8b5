"""Every README code block runs as written.

Python blocks run in a fresh interpreter; shell blocks run line by line with `bash`.
Both run from the repository root against a fresh CRAG_HOME (the environment says
where, as a user's shell would), with answers extractive and Tavily played by a
loopback fake, so the commands are the README's own words.

Exempt, with their reason: `make ...` lines (`make test` is this suite itself; `make
demo` is `crag demo`, which runs here), and the lab's jobs on the dev set (`crag
eval`, `crag tune`, `crag train-grader`: minutes to an hour each; their commands are
tested on small inputs in test_eval_cli.py and test_train_grader.py).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_tavily import FakeTavily

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
BLOCKS = re.findall(r"^```(python|bash)\n(.*?)^```", README, flags=re.S | re.M)
EXEMPT = re.compile(r"^\s*(make\b|crag (eval|tune|train-grader)\b)")


def shell_lines(block: str) -> list[str]:
    lines = []
    for raw in block.splitlines():
        line = raw.split("  #", 1)[0].strip()  # an aligned comment is not part of it
        if line and not line.startswith("#") and not EXEMPT.match(line):
            lines.append(line)
    return lines


@pytest.fixture(scope="module")
def readme_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    home = tmp_path_factory.mktemp("readme-home")
    with FakeTavily() as tavily:
        yield {
            **os.environ,
            "CRAG_HOME": str(home),
            "CRAG_CHAT_MODEL": "extractive",
            "TAVILY_API_KEY": "tvly-readme",
            "CRAG_TAVILY_BASE_URL": tavily.base_url,
            "NO_PROXY": "127.0.0.1,localhost",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        }


def test_the_readme_has_code_to_run() -> None:
    kinds = [kind for kind, _ in BLOCKS]
    assert "python" in kinds and "bash" in kinds


def test_every_readme_block_runs_as_written(readme_env: dict[str, str]) -> None:
    """In README order: the shell blocks ingest the library that later blocks ask."""
    ran = 0
    for kind, block in BLOCKS:
        if kind == "python":
            commands = [[sys.executable, "-c", block]]
        else:
            commands = [["bash", "-c", line] for line in shell_lines(block)]
        for command in commands:
            out = subprocess.run(
                command, cwd=REPO, env=readme_env, capture_output=True, text=True, timeout=600
            )
            shown = shlex.join(command)[:300]
            assert out.returncode == 0, f"{shown}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
            ran += 1
    assert ran >= 8
