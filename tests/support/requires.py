"""Optional components of the suite (the `langgraph` and `chroma` commands, the local
model's packages, the evaluation data): a test that needs one skips where it is
missing, so a partial install can still run the rest. Under `CRAG_TEST_REQUIRE_ALL=1`,
which `make test` (and so CI) sets, it fails instead and names the install step that
provides it: a broken install step cannot turn tests off unseen."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

REQUIRE_ALL = "CRAG_TEST_REQUIRE_ALL"
#: The install step of each extra, as the README gives it.
CORE = "make setup (pip install -e .)"
DEV = "make setup (pip install -e '.[dev]')"
LOCAL = "make setup (pip install -e '.[local]')"


def required() -> bool:
    """Whether a missing component fails the test rather than skipping it."""
    return os.environ.get(REQUIRE_ALL, "") not in ("", "0")


def missing(what: str, install: str) -> NoReturn:
    """Skip, or under `CRAG_TEST_REQUIRE_ALL=1` fail, for a component that is not there."""
    if required():
        pytest.fail(f"{what} is missing; {install} provides it ({REQUIRE_ALL}=1)", pytrace=False)
    pytest.skip(f"{what} is missing; {install} provides it", allow_module_level=True)


def require_module(name: str, install: str) -> ModuleType:
    """The module `name`, imported, or a skip (a failure in CI) naming `install`."""
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(f"the Python package `{name}`", install)


def require_command(name: str, install: str) -> Path:
    """The command `name`: this environment's own (beside its Python) or on PATH."""
    beside = Path(sys.executable).with_name(name)
    if beside.exists():
        return beside
    found = shutil.which(name)
    if found is None:
        missing(f"the `{name}` command", install)
    return Path(found)
