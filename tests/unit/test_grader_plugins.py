"""The lab's graders plug into crag's grader table by entry point: a run that names
none of them never imports the lab."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def _run(code: str, home: Path) -> str:
    script = textwrap.dedent(code).replace("HOME", str(home))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout.strip()


PROBE = """
    import sys
    from crag.context import Context
    from crag.grading.registry import make_grader
    grader = make_grader(Context(home="HOME", grader=GRADER), library=True)
    lab = sorted(m for m in sys.modules if m.startswith("crag_lab"))
    print(type(grader).__name__, bool(lab))
"""


def test_the_default_grader_loads_no_lab_module(tmp_path: Path) -> None:
    assert _run(PROBE.replace("GRADER", "'auto'"), tmp_path) == "SimilarityGrader False"


def test_a_lab_grader_is_found_through_its_entry_point(tmp_path: Path) -> None:
    assert _run(PROBE.replace("GRADER", "'features'"), tmp_path) == "FeatureGrader True"


def test_a_saved_grader_makes_offline_load_it_from_the_lab(tmp_path: Path) -> None:
    from crag.context import Context
    from crag.grading.registry import trained_path
    from crag_lab.graders.features import FEATURES, FeatureModel
    from crag_lab.graders.trained import save_trained_grader

    ctx = Context(home=tmp_path)
    save_trained_grader(ctx, FeatureModel([1.0] * len(FEATURES), 0.0).to_dict(), {})
    assert trained_path(ctx).exists()
    assert _run(PROBE.replace("GRADER", "'offline'"), tmp_path) == "FeatureGrader True"


def test_runs_that_name_a_lab_grader_at_once_all_find_it(tmp_path: Path) -> None:
    """The first lookups of a plugged-in name, from several threads at once: each waits
    for the plugins instead of finding the table half loaded."""
    code = """
        from concurrent.futures import ThreadPoolExecutor
        from crag.grading.registry import GRADERS

        def found(_: int) -> bool:
            return "features" in GRADERS and "mean" in GRADERS

        with ThreadPoolExecutor(8) as pool:
            print(sum(pool.map(found, range(8))))
    """
    assert _run(code, tmp_path) == "8"
