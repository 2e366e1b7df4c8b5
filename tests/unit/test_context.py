"""Context: defaults, then settings.json, then CRAG_* env vars, then arguments."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crag.context import Context, save_settings
from crag.graph import checked


def test_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRAG_HOME", str(tmp_path))
    assert Context().upper == Context.__dataclass_fields__["upper"].default  # built-in
    save_settings(tmp_path, {"upper": 0.7, "lower": 0.2, "k": 3})
    assert (Context().upper, Context().k) == (0.7, 3)  # saved settings
    monkeypatch.setenv("CRAG_K", "8")
    assert Context().k == 8  # env beats settings
    assert Context(k=2).k == 2  # arguments beat env
    assert Context().with_overrides(lower=0.1, upper=None).lower == 0.1


def test_env_values_are_typed_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRAG_REFINE", "false")
    monkeypatch.setenv("CRAG_TIMEOUT_S", "2.5")
    monkeypatch.setenv("CRAG_CHROMA_URL", "none")
    ctx = Context()
    assert ctx.refine is False and ctx.timeout_s == 2.5 and ctx.chroma_url is None
    monkeypatch.setenv("CRAG_K", "many")
    with pytest.raises(ValueError, match="CRAG_K"):
        Context()
    monkeypatch.delenv("CRAG_K")
    monkeypatch.setenv("CRAG_EXTERNAL", "bing")
    with pytest.raises(ValueError, match="CRAG_EXTERNAL"):
        checked(Context())
    monkeypatch.delenv("CRAG_EXTERNAL")
    with pytest.raises(ValueError, match=r"grader='judgee'.*auto, features"):
        checked(Context(grader="judgee"))
    assert checked(Context(chat_model="extractive", embeddings="openai:x")).k == 5


def test_contradictory_thresholds_are_rejected() -> None:
    with pytest.raises(ValueError, match="lower <= upper"):
        Context(lower=0.8, upper=0.5)
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
        ({"chroma_url": 12345}, "chroma_url=12345: expected str"),
        ({"upper": True}, "upper=True: expected float"),
        ({"k": -1}, "k, web_k and max_strips must be >= 1"),
    ],
)
def test_settings_of_the_wrong_type_name_the_file(
    saved: dict[str, object], message: str, tmp_path: Path
) -> None:
    (tmp_path / "settings.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        Context(home=tmp_path)
    if "must be" not in message:
        assert str(tmp_path / "settings.json") in str(info.value)
