"""A name → factory table, one per kind of provider (graders, external sources,
chat models, embeddings).

Adding a provider is one module and one `register` call: the names a `Context`
field accepts, the CLI's help and the error for an unknown name all read the
table, so nothing else has to change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from crag.errors import ProviderError

F = TypeVar("F", bound=Callable[..., object])


class Registry(Generic[F]):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, tuple[F, str]] = {}

    def register(self, name: str, help: str) -> Callable[[F], F]:
        """Decorator: `@GRADERS.register("features", "what it is")`."""

        def add(factory: F) -> F:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = (factory, help)
            return factory

        return add

    def __getitem__(self, name: str) -> F:
        try:
            return self._entries[name][0]
        except KeyError:
            raise ProviderError(
                f"unknown {self.kind} {name!r}: use {', '.join(self._entries)}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def split(self, spec: str, forms: str) -> tuple[str, str]:
        """`name` or `name:model` as (name, model), for a registered name and, after a
        colon, a model; otherwise a ProviderError listing the valid `forms`."""
        name, colon, model = spec.strip().partition(":")
        model = model.strip()
        if name not in self._entries or (colon and not model):
            raise ProviderError(f"unknown {self.kind} {spec!r}; valid forms: {forms}")
        return name, model

    def names(self) -> list[str]:
        return list(self._entries)

    def describe(self) -> str:
        """One line per entry, for help texts."""
        return "; ".join(f"{name}: {help}" for name, (_, help) in self._entries.items())
