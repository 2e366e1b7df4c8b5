"""Context: defaults, then settings.json, then CRAG_* env vars, then arguments."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from crag.api import check_ready, checked
from crag.context import KNOBS, Context
from crag.errors import ProviderError
from crag.settings import save_settings


def test_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRAG_HOME", str(tmp_path))
    assert Context().grading.upper == KNOBS["upper"].default  # built-in
    save_settings(tmp_path, {"upper": 0.7, "lower": 0.2, "k": 3})
    assert (Context().grading.upper, Context().retrieval.k) == (0.7, 3)  # saved settings
    monkeypatch.setenv("CRAG_K", "8")
    assert Context().retrieval.k == 8  # env beats settings
    assert Context(k=2).retrieval.k == 2  # arguments beat env
    assert Context().with_overrides(lower=0.1, upper=None).grading.lower == 0.1


def test_env_values_are_typed_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRAG_REFINE", "false")
    monkeypatch.setenv("CRAG_TIMEOUT_S", "2.5")
    monkeypatch.setenv("CRAG_CHROMA_URL", "none")
    ctx = Context()
    assert (
        ctx.refinement.refine is False
        and ctx.search.timeout_s == 2.5
        and ctx.store.chroma_url is None
    )
    monkeypatch.setenv("CRAG_K", "many")
    with pytest.raises(ValueError, match="CRAG_K"):
        Context()
    monkeypatch.delenv("CRAG_K")
    monkeypatch.setenv("CRAG_EXTERNAL", "bing")
    with pytest.raises(ValueError, match="CRAG_EXTERNAL"):
        checked(Context())
    monkeypatch.delenv("CRAG_EXTERNAL")
    listed = r"grader='judgee'.*auto, offline, similarity.*, features, trained"  # the lab's too
    with pytest.raises(ValueError, match=listed):
        checked(Context(grader="judgee"))
    assert checked(Context(chat_model="extractive", embeddings="openai:x")).retrieval.k == 10


def test_an_empty_path_is_refused_and_a_home_folder_path_expanded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CRAG_HOME", "")  # would be the current folder
    with pytest.raises(ValueError, match=r"CRAG_HOME.*empty"):
        Context()
    monkeypatch.delenv("CRAG_HOME")
    monkeypatch.setenv("CRAG_READER_FILE", "")  # an optional path: unset
    assert Context().grading.reader_file is None
    monkeypatch.setenv("CRAG_READER_FILE", "~/reader.onnx")
    assert Context().grading.reader_file == Path.home() / "reader.onnx"


def test_only_the_providers_a_run_uses_must_be_able_to_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    base = dict(chat_model="extractive", external="local", grader="offline")
    check_ready(Context(**base))  # offline throughout: nothing to start
    # named but unused: a judge model with an offline grader, a source not in `sources`
    check_ready(Context(**base, judge_model="openai:m"))
    check_ready(Context(**base, judge_model="openai:m", verify_claims=True))  # no model answer
    check_ready(Context(**{**base, "external": "tavily"}, sources="local"))
    for used in (
        {"external": "tavily"},
        {"chat_model": "openai:m"},
        {"grader": "judge", "judge_model": "openai:m"},
        {"embeddings": "openai:e"},
        # the check of a model's answer against its sources asks the judge model
        {"chat_model": "local", "judge_model": "openai:m", "verify_claims": True},
    ):
        with pytest.raises(ProviderError, match=r"TAVILY_API_KEY|OPENAI_API_KEY"):
            check_ready(Context(**{**base, **used}))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    check_ready(Context(**{**base, "grader": "judge", "judge_model": "openai:m"}))


def test_contradictory_thresholds_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=re.escape("lower=0.8 (from argument): must not exceed")):
        Context(lower=0.8, upper=0.5)
    save_settings(tmp_path, {"lower": 0.5})  # the knob the user did set is named with its own
    said = re.escape("must not exceed upper=0.3 (from argument)")
    with pytest.raises(ValueError, match=f"settings.json.*{said}"):
        Context(home=tmp_path, upper=0.3)
    with pytest.raises(ValueError, match="strip_sentences"):
        Context(strip_sentences=5)


def test_corrupt_settings_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text("{not json")
    with pytest.raises(ValueError, match="settings"):
        Context(home=tmp_path)


@pytest.mark.parametrize(
    ("saved", "message"),
    [
        ({"k": "abc"}, "k='abc'"),
        ({"chroma_url": 12345}, "chroma_url=12345 (from "),
        ({"upper": True}, "upper=True (from "),
        ({"k": -1}, "k=-1 (from "),
    ],
)
def test_settings_of_the_wrong_type_name_the_file(
    saved: dict[str, object], message: str, tmp_path: Path
) -> None:
    (tmp_path / "settings.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        Context(home=tmp_path)
    assert str(tmp_path / "settings.json") in str(info.value)


def test_an_argument_equal_to_the_default_still_beats_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CRAG_CHAT_MODEL", "extractive")
    monkeypatch.setenv("CRAG_K", "3")
    ctx = Context(home=tmp_path, chat_model="local", k=5)
    assert (ctx.models.chat_model, ctx.retrieval.k) == ("local", 5)
    assert ctx.origin("k") == "argument"
    assert Context(home=tmp_path).models.chat_model == "extractive"
    assert Context(home=tmp_path).origin("k") == "CRAG_K"
    # a copy keeps what was given and resolves the rest again
    assert Context(home=tmp_path).with_overrides(chat_model="local").models.chat_model == "local"


def test_a_new_home_brings_its_own_settings(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "settings.json").write_text(json.dumps({"upper": 0.7, "lower": 0.2}))
    ctx = Context(home=tmp_path).with_overrides(home=other)
    assert (ctx.grading.upper, ctx.grading.lower) == (0.7, 0.2)
    assert ctx.origin("upper") == str(other / "settings.json")
    # an argument still beats the file
    assert Context(home=other, upper=0.9).grading.upper == 0.9


def test_the_cli_flag_equal_to_the_default_beats_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from crag.cli.main import build_parser
    from crag.cli.options import context_from_args

    monkeypatch.setenv("CRAG_CHAT_MODEL", "extractive")
    monkeypatch.setenv("CRAG_K", "3")
    args = build_parser().parse_args(
        ["ask", "q?", "--home", str(tmp_path), "--chat-model", "local", "--k", "5"]
    )
    ctx = context_from_args(args)
    assert (ctx.models.chat_model, ctx.retrieval.k) == ("local", 5)


def test_a_mapping_knob_from_arguments_env_and_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Context(home=tmp_path).confidence.authority == {}
    save_settings(tmp_path, {"authority": {"forum": 0.3, "vendor/docs/": "official"}})
    assert Context(home=tmp_path).confidence.authority == {"forum": 0.3, "vendor/docs/": "official"}
    monkeypatch.setenv("CRAG_AUTHORITY", '{"news.example": 1}')
    assert Context(home=tmp_path).confidence.authority == {
        "news.example": 1.0
    }  # env beats settings
    assert Context(home=tmp_path, authority={}).confidence.authority == {}  # an argument beats both
    monkeypatch.setenv("CRAG_AUTHORITY", "forum=0.3")
    with pytest.raises(ValueError, match=r"authority=.*CRAG_AUTHORITY.*expected a JSON object"):
        Context(home=tmp_path)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ([["forum", 0.2]], "expected a JSON object, got list"),
        ({"forum": 2}, "'forum': must be a number from 0 to 1"),
        ({"forum": "trusted"}, "unknown kind 'trusted'"),
        ({"forum": None}, "expected a number or a text, got None"),
        ({"forum": True}, "expected a number or a text, got True"),
        ({"": 0.5}, "every key must be a non-empty text"),
    ],
)
def test_a_bad_authority_mapping_is_one_clear_error(value: object, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        Context(authority=value)  # type: ignore[arg-type]


def test_confidence_knobs_are_checked() -> None:
    with pytest.raises(ValueError, match=r"weight_recency=1.5 .*from 0 to 1"):
        Context(weight_recency=1.5)
    no_weight = {f"weight_{s}": 0.0 for s in ("relevance", "completeness", "recency", "authority")}
    with pytest.raises(ValueError, match="must not all be 0"):
        Context(**no_weight)
    with pytest.raises(ValueError, match="recency_half_life_days"):
        Context(recency_half_life_days=0)
    with pytest.raises(ValueError, match=r"conflicts='always' .*one of auto, rule, model, off"):
        Context(conflicts="always")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="source_priority"):
        Context(source_priority="web")  # type: ignore[arg-type]


def test_set_takes_json_and_group_names() -> None:
    import argparse

    from crag.cli.options import add_context_flags, context_from_args

    parser = argparse.ArgumentParser()
    add_context_flags(parser)
    args = parser.parse_args(
        ["--set", 'authority={"forum": 0.1}', "--set", "confidence.conflicts=rule"]
    )
    ctx = context_from_args(args)
    assert ctx.confidence.authority == {"forum": 0.1} and ctx.confidence.conflicts == "rule"
    args = parser.parse_args(["--set", "source_priority=sideways"])
    with pytest.raises(ValueError, match=r"source_priority='sideways' .*internal-first"):
        context_from_args(args)


def test_a_knob_is_set_by_flat_name_group_name_or_group(tmp_path: Path) -> None:
    from crag.method_knobs import Grading

    assert Context(home=tmp_path, upper=0.7).grading.upper == 0.7
    assert Context(home=tmp_path, **{"grading.upper": 0.7}).grading.upper == 0.7
    assert Context(home=tmp_path, grading={"upper": 0.7, "lower": 0.1}).grading.lower == 0.1
    ctx = Context(home=tmp_path, grading=Grading(upper=0.8), cache={"size": 5})
    assert (ctx.grading.upper, ctx.cache.size, ctx.origin("cache_size")) == (0.8, 5, "argument")
    assert ctx.get("cache_size") == 5 and ctx.get("upper") == 0.8
    # a copy keeps the groups it was given
    assert ctx.with_overrides(k=3).grading.upper == 0.8
    # a group's dataclass gives only what it sets: its other knobs keep their origins
    assert (ctx.origin("upper"), ctx.origin("lower")) == ("argument", "default")
    for bad in ({"uper": 0.5}, {"grade.upper": 0.5}, {"grading": {"uper": 0.5}}):
        with pytest.raises(ValueError, match="unknown knob"):
            Context(home=tmp_path, **bad)


def test_settings_may_name_groups_and_ignore_what_they_do_not_know(tmp_path: Path) -> None:
    save_settings(tmp_path, {"grading": {"upper": 0.7}, "retired_knob": 1, "k": 4})
    ctx = Context(home=tmp_path)
    assert (ctx.grading.upper, ctx.retrieval.k) == (0.7, 4)


def test_groups_are_small_and_every_knob_is_documented() -> None:
    from crag.context import GROUPS, KNOBS

    sizes = {group: sum(k.group == group for k in KNOBS.values()) for group in GROUPS}
    assert max(sizes.values()) <= 15, sizes
    assert all(k.description.strip() for k in KNOBS.values())
    assert all(cls.__doc__ for cls in GROUPS.values())


def test_crag_config_lists_a_users_knobs_with_their_origin_and_all_with_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from crag.cli.main import main
    from crag.context import KNOBS

    def listed(*flags: str) -> dict[str, dict[str, Any]]:
        assert main(["config", "--home", str(tmp_path), "--set", "upper=0.6", *flags]) == 0
        return dict(json.loads(capsys.readouterr().out))

    monkeypatch.setenv("CRAG_WEB_K", "7")
    every = listed("--json", "--all")
    assert {v["knob"] for group in every.values() for v in group.values()} == set(KNOBS)
    users = listed("--json")
    names = {v["knob"] for group in users.values() for v in group.values()}
    assert names == {n for n, k in KNOBS.items() if not k.tuning} and len(names) <= 35
    assert {"upper", "lower", "k", "chat_model", "external"} <= names
    assert not {"fast_path", "strip_weight", "weight_recency", "cache_threshold"} & names
    assert users["grading"]["upper"] == {"knob": "upper", "value": 0.6, "origin": "argument"}
    assert users["search"]["web_k"]["origin"] == "CRAG_WEB_K"
    # a tuning knob is still set like any other
    assert main(["config", "--home", str(tmp_path), "--set", "fast_gap=0.2", "--all"]) == 0
    text = capsys.readouterr().out
    assert "fast_gap = 0.2  (argument)" in text
    assert main(["config", "--home", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "[grading]" in text and "web_k = 7  (CRAG_WEB_K)" in text
    assert "fast_gap" not in text and "28 tuning knobs" in text


def test_a_group_given_as_its_dataclass_leaves_the_environment_its_other_knobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crag.method_knobs import Retrieval

    monkeypatch.setenv("CRAG_K", "3")
    ctx = Context(home=tmp_path, retrieval=Retrieval(decompose=False))
    assert (ctx.retrieval.k, ctx.origin("k")) == (3, "CRAG_K")
    assert ctx.retrieval.decompose is False
