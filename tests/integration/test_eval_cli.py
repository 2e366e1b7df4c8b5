"""`crag eval` and `crag tune` end to end, offline, over the sample library.

The store is built once per session (sample PDFs → books, sample web pages →
external) in a temporary CRAG_HOME; everything runs without a language model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crag.cli.main import main
from crag.context import Context
from crag.ingest.indexer import ingest_path

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
SYSTEMS = ("crag", "naive", "tutorial")


@pytest.fixture(scope="session")
def sample_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("crag-eval-home")
    ctx = Context(home=home)
    for folder, collection in (("library", "books"), ("external", "external")):
        result = ingest_path(ctx, SAMPLES / folder, collection=collection)
        assert result.exit_code == 0, result.to_dict()
    return home


@pytest.fixture(scope="session")
def sample_pairs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A few labelled pairs in the grader_pairs.jsonl schema, over the sample questions."""
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    q = "Which TCP port does the Lumen server's HTTPS API listen on by default?"
    rows = [
        (q, "The HTTPS API listens on TCP port 7420, set by the listen_port key.", True),
        (q, "Lumen serves its API on port 7420 unless listen_port says otherwise.", True),
        (q, "Refunds of annual plans are possible within 30 days of purchase.", False),
        (q, "Seats can be added to a plan at any time from the billing page.", False),
    ]
    path.write_text(
        "".join(
            json.dumps({"qid": f"sample-port-{i}", "question": a, "passage": b, "relevant": c})
            + "\n"
            for i, (a, b, c) in enumerate(rows)
        )
    )
    return path


@pytest.fixture(scope="session")
def eval_report(sample_home: Path, sample_pairs: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("report") / "eval"
    code = main(
        [
            "eval",
            str(SAMPLES / "questions.jsonl"),
            "--pairs",
            str(sample_pairs),
            "--home",
            str(sample_home),
            "--no-llm",
            "--limit",
            "5",
            "--out",
            str(out),
            "--graders",
            "similarity,features",
            "--quiet",
        ]
    )
    assert code == 0
    return out


def test_eval_writes_the_report_files(eval_report: Path) -> None:
    for name in ("report.md", "metrics.json", "records.jsonl"):
        assert (eval_report / name).stat().st_size > 0
    for name in ("score_hist.png", "confusion.png", "threshold_surface.png", "latency.png"):
        assert (eval_report / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (eval_report / "report.md").read_text()
    assert "| metric | crag | naive | tutorial |" in text
    assert "## Definitions" in text


def test_metrics_cover_three_systems_with_sane_values(eval_report: Path) -> None:
    metrics = json.loads((eval_report / "metrics.json").read_text())
    assert metrics["n_questions"] == 5
    assert set(metrics["systems"]) == set(SYSTEMS)
    for name, m in metrics["systems"].items():
        assert m["n"] == 5 and m["errors"] == 0, name
        assert 0.0 <= m["support_recall"] <= 1.0
        assert 0.0 < m["compression"]["ratio"] <= 1.0
        assert m["latency"]["all"]["p50"] > 0
        # --limit 5 is stratified: all four categories are present
        assert all(m["by_category"][c]["n"] >= 1 for c in ("internal", "external", "partial"))
        assert m["none"]["n"] == 1
    assert metrics["systems"]["naive"]["verdict_accuracy"] is None
    assert metrics["systems"]["naive"]["compression"]["ratio"] == 1.0
    assert metrics["systems"]["naive"]["web_search_rate"] == 0.0
    crag = metrics["systems"]["crag"]
    assert 0.0 <= crag["verdict_accuracy"] <= 1.0
    assert sum(map(sum, crag["confusion"]["matrix"])) == 5
    # refinement keeps less than the whole documents
    assert crag["compression"]["ratio"] < 1.0
    grader = metrics["grader"]
    assert grader["n"] == 4 and 0.0 <= grader["auc"] <= 1.0
    assert set(grader["at"]) == {"lower", "upper", "tutorial"}
    surface = metrics["threshold_surface"]
    assert len(surface["accuracy"]) == len(surface["lowers"]) == 21


def test_graders_are_compared_side_by_side(eval_report: Path) -> None:
    rows = json.loads((eval_report / "metrics.json").read_text())["graders"]
    assert [r["grader"] for r in rows] == ["similarity", "features"]
    for row in rows:
        assert 0.0 <= row["auc"] <= 1.0 and row["pairs_per_second"] > 0
        assert 0.0 <= row["verdict_accuracy"] <= 1.0
    assert "## Graders side by side" in (eval_report / "report.md").read_text()


def test_records_have_the_summary_shape_for_every_system(eval_report: Path) -> None:
    rows = [json.loads(line) for line in (eval_report / "records.jsonl").open()]
    assert len(rows) == 15
    keys = {"question", "verdict", "answer", "citations", "path", "timings", "context"}
    for row in rows:
        assert keys <= set(row), row["system"]
        assert row["path"][0] == "condense" and row["path"][-1] == "verify"
        for entry in row["context"]:
            assert entry["source"] != "?" and entry["text"]
    naive = [r for r in rows if r["system"] == "naive"]
    assert all(r["path"] == ["condense", "retrieve", "generate", "verify"] for r in naive)


def test_tune_finds_and_saves_thresholds(sample_home: Path, capsys: pytest.CaptureFixture) -> None:
    args = ["tune", str(SAMPLES / "questions.jsonl"), "--home", str(sample_home), "--no-llm"]
    args += ["--quiet", "--json", "--save", "--grid-step", "0.1"]
    try:
        # the defaults already get every verdict right here: a tie moves nothing
        assert main(args) == 0
        assert "saved nothing" in capsys.readouterr().err
        assert not (sample_home / "settings.json").exists()
        # thresholds that decline everything: the fitted ones are saved
        assert main([*args, "--set", "lower=0.95", "--set", "upper=0.99"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["best"]["accuracy"] > result["current"]["accuracy"]
        best = result["best"]
        assert 0.0 <= best["lower"] <= best["upper"] <= 1.0
        assert result["surface"]["n"] == 7
        saved = json.loads((sample_home / "settings.json").read_text())
        assert saved == {
            "lower": best["lower"],
            "upper": best["upper"],
            "strip_threshold": best["strip"]["strip_threshold"],
        }
    finally:  # other tests on this home must run with the default thresholds
        (sample_home / "settings.json").unlink(missing_ok=True)


def test_unknown_system_is_a_usage_error(sample_home: Path, capsys: pytest.CaptureFixture) -> None:
    code = main(
        ["eval", str(SAMPLES / "questions.jsonl"), "--home", str(sample_home), "--systems", "rag"]
    )
    assert code == 2
    assert "unknown system" in capsys.readouterr().err
