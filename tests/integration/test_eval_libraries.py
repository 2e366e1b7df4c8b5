"""`crag eval` over two libraries, held out: each system fitted on the other library,
offline, no language model. The two libraries are made of the sample library with two
different question sets, so the run is small and both homes are real stores."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from crag.cli.main import main
from crag.grading.outcome import SIGNALS, LogisticModel

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
PORT = "Which TCP port does the Lumen server's HTTPS API listen on by default?"
MEMORY = "How much memory does the smallest supported Lumen server have?"
PAIRS = {
    "a": [
        (PORT, "The HTTPS API listens on TCP port 7420, set by the listen_port key.", True),
        (PORT, "Lumen serves its API on port 7420 unless listen_port says otherwise.", True),
        (PORT, "Refunds of annual plans are possible within 30 days of purchase.", False),
        (PORT, "Seats can be added to a plan at any time from the billing page.", False),
    ],
    "b": [
        (MEMORY, "The smallest supported machine has 2 GB of memory and two cores.", True),
        (MEMORY, "A server with 2 GB of memory is the smallest Lumen supports.", True),
        (MEMORY, "The API allows 300 requests per minute since version 3.", False),
        (MEMORY, "Annual plans renew on the date of purchase.", False),
    ],
}


def library(root: Path, name: str, questions: Path, first: int) -> Path:
    folder = root / name
    folder.mkdir()
    shutil.copytree(SAMPLES / "library", folder / "books")
    shutil.copytree(SAMPLES / "external", folder / "external")
    lines = questions.read_text().splitlines(keepends=True)[:first]
    (folder / "questions.jsonl").write_text("".join(lines))
    (folder / "grader_pairs.jsonl").write_text(
        "".join(
            json.dumps({"qid": f"{name}-{i}", "question": q, "passage": p, "relevant": r}) + "\n"
            for i, (q, p, r) in enumerate(PAIRS[name])
        )
    )
    return folder


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("libraries")


@pytest.fixture(scope="module")
def report(root: Path) -> Path:
    a = library(root, "a", SAMPLES / "questions.jsonl", 7)
    b = library(root, "b", SAMPLES / "factoids.jsonl", 6)
    out = root / "report"
    code = main(
        [
            "eval",
            f"a={a}",
            f"b={b}",
            "--ingest",
            "--held-out",
            "--eval-home",
            str(root / "homes"),
            "--systems",
            "crag,features,naive",
            "--limit",
            "4",
            "--no-llm",
            "--quiet",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    return out


def test_both_libraries_and_their_mean_are_reported_with_decision_quality(report: Path) -> None:
    summary = json.loads((report / "metrics.json").read_text())
    assert summary["libraries"] == {"a": {"fitted_on": ["b"]}, "b": {"fitted_on": ["a"]}}
    for system in ("crag", "features", "naive"):
        row = summary["systems"][system]
        per_library = [row["by_library"][n]["decision_quality"] for n in ("a", "b")]
        assert all(0.0 <= v <= 1.0 for v in per_library)
        assert row["decision_quality"] == pytest.approx(sum(per_library) / 2)
        assert set(row["by_library"]["a"]["by_category"]) == {
            "internal",
            "external",
            "partial",
            "none",
        }
    text = (report / "report.md").read_text()
    assert "Held out by library" in text and "| crag | mean |" in text


def test_each_system_is_fitted_on_the_other_library_only(report: Path) -> None:
    on_a = json.loads((report / "a" / "metrics.json").read_text())
    assert on_a["fitted_on"] == ["b"]
    # the feature evaluator's weights are fitted on b's pairs alone
    features = on_a["system_config"]["features"]
    assert features["grader"] == "trained"
    fitted = json.loads(Path(features["grader_file"]).read_text())
    assert fitted["metadata"]["fitted_on"] == ["b"] and fitted["metadata"]["pairs"] == 4
    # crag's default grader (similarity) has no weights: only its thresholds are fitted
    crag = on_a["system_config"]["crag"]
    assert crag["grader"] == "auto" and crag["grader_file"] is None
    assert 0.0 <= crag["lower"] <= crag["upper"] <= 1.0
    assert 0.0 <= crag["strip_threshold"] <= 0.9
    # naive RAG grades nothing: nothing to fit, it runs on the defaults
    assert on_a["system_config"]["naive"]["grader_file"] is None
    # the pair AUC of crag's fitted grader sits beside plain similarity's, on a's pairs
    assert on_a["grader"]["n"] == 4 and on_a["grader"]["similarity"]["n"] == 4


def test_crags_confidence_is_measured_held_out_and_the_model_fitted_on_both_saved(
    report: Path,
) -> None:
    summary = json.loads((report / "metrics.json").read_text())
    for name in ("a", "b"):
        held = summary["confidence"][name]
        assert held["n"] == 4 and 0.0 <= held["ece"] <= 1.0
        assert sum(b["n"] for b in held["bins"]) == 4
    assert "crag's confidence, held out by library" in (report / "report.md").read_text()
    assert (report / "reliability.png").stat().st_size > 1000
    model = json.loads((report / "confidence.json").read_text())
    assert LogisticModel.from_dict(model, SIGNALS).features == SIGNALS


def test_a_questions_file_and_folders_cannot_be_mixed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(SAMPLES / "questions.jsonl"), str(SAMPLES), "--no-llm"]) == 2
    assert "give one questions file, or library folders (not both)" in capsys.readouterr().err


def test_tune_fits_on_one_library_and_reports_on_another(
    report: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    code = main(
        [
            "tune",
            str(root / "a" / "questions.jsonl"),
            "--home",
            str(root / "homes" / "a"),
            "--test",
            str(root / "b" / "questions.jsonl"),
            "--test-home",
            str(root / "homes" / "b"),
            "--no-llm",
            "--json",
            "--quiet",
        ]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    test = result["test"]
    assert test["n"] == 6  # every question of b, graded in b's home
    assert 0.0 <= test["held_out_accuracy"] <= 1.0
    # b's own best is in-sample for b: no threshold fitted on a can beat it there
    assert test["own_best"]["accuracy"] >= test["held_out_accuracy"]


def test_ablate_on_one_library_says_it_is_not_held_out_and_a_failed_run_fails_it(
    report: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ablate", f"a={root / 'a'}", "--eval-home", str(root / "homes"), "--no-llm"]
    argv += ["--only", "crag/no-fast-path", "--limit", "2", "--quiet", "--out", str(root / "ab")]
    code = main([*argv, "--set", "max_question_chars=20"])  # every question is too long
    err = capsys.readouterr().err
    assert code == 1 and "not held out" in err and "question run(s) failed" in err
    assert (root / "ab" / "ablation.md").is_file()  # the report is still written


def test_a_library_not_ingested_fails_before_any_is_measured(
    report: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = root / "early"
    argv = ["eval", f"a={root / 'a'}", f"c={root / 'a'}", "--eval-home", str(root / "homes")]
    code = main([*argv, "--no-llm", "--systems", "crag", "--quiet", "--out", str(out)])
    assert code != 0 and "no library" in capsys.readouterr().err
    assert not (out / "a").exists()  # library a was not run first
