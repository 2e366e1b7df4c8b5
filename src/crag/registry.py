"""A name → factory table, one per kind of provider (graders, external sources,
chat models, embeddings).

Adding a provider is one module and one `register` call: the names a `Context`
field accepts, the CLI's help and the error for an unknown name all read the
table, so nothing else has to change. An entry may name a cheap `ready` check (a
key in the environment, an optional package installed) that a run makes before its
first question, so a missing key is not found out halfway through one. A table may
take plugins: modules named by an entry-point group (`crag.graders`: the lab's
graders), imported the first time a name is not found among the built-in ones, or the
whole table is listed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from crag.errors import ProviderError

F = TypeVar("F", bound=Callable[..., object])
#: What a provider needs before it can start; raises ProviderError saying what is missing.
Ready = Callable[[], object]

log = logging.getLogger(__name__)


class Registry(Generic[F]):
    def __init__(self, kind: str, plugins: str | None = None) -> None:
        self.kind = kind
        self.plugins = plugins  # the entry-point group whose modules register more
        self._entries: dict[str, tuple[F, str, Ready | None]] = {}
        self._loaded = plugins is None
        self._loading = threading.RLock()

    def _load_plugins(self) -> None:
        """Import each plugin module once (its import registers its entries); one that
        fails to import is reported and left out. A run that looks up a name while
        another thread loads the plugins waits for them."""
        if self._loaded:
            return
        with self._loading:
            if self._loaded:
                return
            for entry in entry_points(group=self.plugins or ""):
                try:
                    entry.load()
                except Exception as exc:  # a broken plugin must not break the built-ins
                    log.warning("%s plugin %s could not be loaded: %s", self.kind, entry.value, exc)
            self._loaded = True

    def _entry(self, name: str) -> tuple[F, str, Ready | None] | None:
        if name not in self._entries:
            self._load_plugins()
        return self._entries.get(name)

    def register(self, name: str, help: str, ready: Ready | None = None) -> Callable[[F], F]:
        """Decorator: `@GRADERS.register("features", "what it is")`."""

        def add(factory: F) -> F:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = (factory, help, ready)
            return factory

        return add

    def __getitem__(self, name: str) -> F:
        if (entry := self._entry(name)) is None:
            raise ProviderError(f"unknown {self.kind} {name!r}: use {', '.join(self.names())}")
        return entry[0]

    def check_ready(self, name: str) -> None:
        """Raise ProviderError if provider `name` (known) cannot start here."""
        if (entry := self._entry(name)) is not None and entry[2] is not None:
            entry[2]()

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._entry(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def split(self, spec: str, forms: str) -> tuple[str, str]:
        """`name` or `name:model` as (name, model), for a registered name and, after a
        colon, a model; otherwise a ProviderError listing the valid `forms`."""
        name, colon, model = spec.strip().partition(":")
        model = model.strip()
        if name not in self or (colon and not model):
            raise ProviderError(f"unknown {self.kind} {spec!r}; valid forms: {forms}")
        return name, model

    def names(self) -> list[str]:
        self._load_plugins()
        return list(self._entries)

    def describe(self) -> str:
        """One line per entry, for help texts."""
        self._load_plugins()
        return "; ".join(f"{name}: {help}" for name, (_, help, _) in self._entries.items())
