"""What a knob is and how its values are read: a documented dataclass field (`knob`),
the table of every knob by flat name (`knob_table`), the checks a value must pass, and
values written as text or JSON (`CRAG_<KNOB>` environment variables, the
`CRAG_HOME/settings.json` that `crag tune --save` writes) read into the types the
configuration declares, with an error that says what was expected."""

from __future__ import annotations

import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

ENV_PREFIX = "CRAG_"
SETTINGS_FILE = "settings.json"

#: What a knob's value must be (`knob(..., check=NAME)`), and the error when it is not.
CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "share": (lambda v: _number(v) and 0.0 <= v <= 1.0, "must be a number from 0 to 1"),
    "seconds": (lambda v: _number(v) and 0 < v < math.inf, "must be a positive number of seconds"),
    "days": (lambda v: _number(v) and 0 < v < math.inf, "must be a positive number of days"),
    "count": (lambda v: v >= 1, "must be >= 1"),
    "amount": (lambda v: v >= 0, "must be >= 0"),
}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def knob(
    default: Any,
    doc: str,
    *,
    name: str | None = None,
    check: str | None = None,
    tuning: bool = False,
) -> Any:
    """A dataclass field with its documentation, the check its values must pass, and,
    where the field's name would be ambiguous outside its group, the flat name it is
    known by (`cache.threshold`: `cache_threshold`). A `tuning` knob is one the lab fits
    or switches off to measure a mechanism: settable like any other, but `crag config`
    lists it only with `--all`."""
    meta = {"description": doc, "knob": name, "check": check, "tuning": tuning}
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Knob:
    """One knob: its flat name, its group and field, type, documentation and check."""

    name: str
    group: str
    attr: str
    annotation: Any
    description: str
    default: Any
    check: str | None
    tuning: bool


def knob_table(groups: Mapping[str, type]) -> dict[str, Knob]:
    """Every knob of the groups (dataclasses of `knob` fields) by flat name."""
    table: dict[str, Knob] = {}
    for group, cls in groups.items():
        hints = typing.get_type_hints(cls, localns={"Path": Path})
        for f in fields(cls):
            meta = f.metadata
            name = meta["knob"] or f.name
            assert name not in table, f"knob {name!r} is in two groups"
            assert meta["check"] in (None, *CHECKS), meta["check"]
            table[name] = Knob(
                name,
                group,
                f.name,
                hints[f.name],
                meta["description"],
                _default(f),
                meta["check"],
                meta["tuning"],
            )
    return table


def _default(f: Field[Any]) -> Any:
    return f.default_factory() if f.default_factory is not MISSING else f.default


def _mapping(value: Any, annotation: Any) -> dict[str, Any]:
    """A JSON object (or its text, as an environment variable holds it) as a mapping of
    names to the field's value types: `{"forum": 0.2, "docs/vendor/": "blog"}`."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(f"expected a JSON object, got {value!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    kinds = typing.get_args(typing.get_args(annotation)[1]) or (typing.get_args(annotation)[1],)
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"every key must be a non-empty text, got {key!r}")
        if float in kinds and isinstance(item, int | float) and not isinstance(item, bool):
            out[key] = float(item)
        elif str in kinds and isinstance(item, str):
            out[key] = item
        else:
            expected = " or ".join("a number" if k is float else "a text" for k in kinds)
            raise ValueError(f"{key!r}: expected {expected}, got {item!r}")
    return out


def _coerce(raw: str, annotation: Any) -> Any:
    """Turn an environment string into the field's type, with a clear error."""
    if isinstance(annotation, str):  # postponed annotations
        annotation = eval(annotation, vars(typing) | {"Path": Path})
    origin = typing.get_origin(annotation)
    if origin is dict:
        return _mapping(raw, annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin in (typing.Union, types.UnionType):
        if raw.strip().lower() in ("", "none", "null"):
            return None
        return _coerce(raw, args[0])
    if origin is Literal:
        if raw not in args:
            raise ValueError(f"expected one of {', '.join(map(str, args))}, got {raw!r}")
        return raw
    if annotation is bool:
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected a boolean (true/false), got {raw!r}")
    if annotation in (int, float):
        try:
            return annotation(raw)
        except ValueError:
            kind = "an integer" if annotation is int else "a number"
            raise ValueError(f"expected {kind}, got {raw!r}") from None
    if annotation is Path:
        if not raw.strip():  # Path("") is the current folder: surely not what was meant
            raise ValueError("expected a path, got an empty value")
        return Path(raw)
    return raw


def typed(value: Any, annotation: Any) -> Any:
    """A JSON value as the field's type (text as an environment value would be read)."""
    if typing.get_origin(annotation) is dict:
        return _mapping(value, annotation)
    if isinstance(value, str):
        return _coerce(value, annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if value is None and type(None) in typing.get_args(annotation):
        return None
    kind = args[0] if args else annotation
    if kind is Path and isinstance(value, Path):
        return value
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind is bool and isinstance(value, bool):
        return value
    expected = getattr(kind, "__name__", str(kind))
    raise ValueError(f"expected {expected}, got {type(value).__name__}")


def load_settings(home: Path) -> dict[str, Any]:
    """Knobs saved in CRAG_HOME (e.g. thresholds found by `crag tune`), as written."""
    path = Path(home).expanduser() / SETTINGS_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: unreadable settings ({exc}); fix or delete it") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object of settings; fix or delete it")
    return data


def save_settings(home: Path, values: dict[str, Any]) -> Path:
    """Merge `values` into CRAG_HOME/settings.json; env vars and flags still win."""
    path = Path(home).expanduser() / SETTINGS_FILE
    current = load_settings(home)
    current.update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(current, indent=2, sort_keys=True, default=str) + "\n")
    tmp.replace(path)
    return path
