"""Every code block of the README and of docs/ runs as written.

Python blocks run in a fresh interpreter; shell blocks run line by line with `bash`.
They run in the test's temporary folder, laid out as a checkout: the repository's files
linked in, except `eval/`, where `eval/d2l` holds the small sample library (its books,
external pages and questions) in place of the dev set, so the Evaluation section's
commands ingest three PDFs, not the dev library (`make eval` is the full run, a
benchmark). A `/tmp/` path in a command is the temporary folder's `tmp/`. CRAG_HOME is
fresh there too (the environment says where, as a user's shell would); answers are
extractive and Tavily is played by a loopback fake, so the commands are the README's
own words.

Exempt, with their reason: `make ...` lines (`make test` is this suite itself; `make
demo` is `crag demo`, which test_demo.py runs), and the lab's jobs (`crag eval`, `crag
tune`, `crag train-grader`: minutes to an hour each on the dev set; their commands are
tested on small inputs in test_eval_cli.py and test_train_grader.py).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_tavily import FakeTavily

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
#: The README, then docs/ in an order where each file's commands find what the ones
#: before ingested.
DOCUMENTS = [
    REPO / "README.md",
    *(REPO / "docs" / n for n in ("operations.md", "architecture.md", "evaluation.md")),
]
BLOCKS = [
    (kind, block)
    for document in DOCUMENTS
    for kind, block in re.findall(
        r"^```(python|bash)\n(.*?)^```", document.read_text(), flags=re.S | re.M
    )
]
EXEMPT = re.compile(r"^\s*(make\b|crag (eval|tune|train-grader)\b)")
TMP = re.compile(r"(?<![\w.~/-])/tmp/")


def shell_lines(block: str) -> list[str]:
    lines = []
    for raw in block.splitlines():
        line = raw.split("  #", 1)[0].strip()  # an aligned comment is not part of it
        if line and not line.startswith("#") and not EXEMPT.match(line):
            lines.append(line)
    return lines


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`ROOT/crag` (the repository's visible files, linked, with the sample library as
    `eval/d2l`); `ROOT/tmp` stands for `/tmp`."""
    root = tmp_path_factory.mktemp("readme")
    checkout = root / "crag"
    checkout.mkdir()
    for entry in REPO.iterdir():
        if not entry.name.startswith(".") and entry.name != "eval":
            (checkout / entry.name).symlink_to(entry)
    evaluation = checkout / "eval" / "d2l"
    shutil.copytree(SAMPLES / "library", evaluation / "books")
    shutil.copytree(SAMPLES / "external", evaluation / "external")
    shutil.copy(SAMPLES / "questions.jsonl", evaluation / "questions.jsonl")
    (root / "tmp").mkdir()
    return root


@pytest.fixture(scope="module")
def readme_env(workspace: Path) -> Iterator[dict[str, str]]:
    with FakeTavily() as tavily:
        yield {
            **os.environ,
            "CRAG_HOME": str(workspace / "home"),
            "CRAG_CHAT_MODEL": "extractive",
            "TAVILY_API_KEY": "tvly-readme",
            "CRAG_TAVILY_BASE_URL": tavily.base_url,
            "NO_PROXY": "127.0.0.1,localhost",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        }


#: An example of what a command prints: "$ COMMAND" on the first line, then its output.
EXAMPLES = re.findall(r"^```text\n\$ (.*?)\n(.*?)^```", DOCUMENTS[0].read_text(), re.S | re.M)


def test_the_readme_has_code_to_run_and_every_doc_is_run() -> None:
    kinds = [kind for kind, _ in BLOCKS]
    assert "python" in kinds and "bash" in kinds
    assert set(DOCUMENTS[1:]) == set((REPO / "docs").glob("*.md"))


def test_every_readme_block_runs_as_written(workspace: Path, readme_env: dict[str, str]) -> None:
    """In README order: the shell blocks ingest the library that later blocks ask."""
    ran = 0
    for kind, block in BLOCKS:
        if kind == "python":
            commands = [[sys.executable, "-c", block]]
        else:
            lines = [TMP.sub(f"{workspace}/tmp/", line) for line in shell_lines(block)]
            commands = [["bash", "-c", line] for line in lines]
        for command in commands:
            out = subprocess.run(
                command,
                cwd=workspace / "crag",
                env=readme_env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            shown = shlex.join(command)[:300]
            assert out.returncode == 0, f"{shown}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
            ran += 1
    assert ran >= 8


def test_the_readmes_example_output_is_what_crag_prints(
    workspace: Path, readme_env: dict[str, str]
) -> None:
    assert EXAMPLES
    # unchanged since the blocks above ingested them (README order): each costs a hash
    for folder, collection in (("library", "books"), ("external", "external")):
        ingest = f"crag ingest samples/{folder} --collection {collection}"
        subprocess.run(["bash", "-c", ingest], cwd=workspace / "crag", env=readme_env, check=True)
    for command, shown in EXAMPLES:
        out = subprocess.run(
            ["bash", "-c", command],
            cwd=workspace / "crag",
            env={**readme_env, "CRAG_CACHE": "false"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout == shown, command
