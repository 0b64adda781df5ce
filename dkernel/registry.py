"""One small registry of named entries (readers, job methods, kernels).

A :class:`Registry` maps names to entries, refuses a name registered twice, and answers an
unknown name with the close match and the valid names. Built-in entries may live in the
modules of a package that is imported on the first lookup (``discover``), so adding one needs
no edit of a list: the registry names the package, nothing imports it by hand.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def _name(info: pkgutil.ModuleInfo) -> str:
    return info.name


class Registry(Mapping[str, T], Generic[T]):
    """Named entries of one kind.

    Parameters
    ----------
    kind : str
        What an entry is (``"method"``), used in messages.
    error : callable
        ``error(message) -> Exception`` raised by :meth:`lookup` for unknown names.
    discover : str, optional
        A module, or a package whose modules (all of them but ``_private`` ones, sorted by
        name), register the built-in entries when imported; imported before the first lookup
        or listing.
    suffix : str
        Text appended to the list of valid names (``", or a callable f(X, Y)"``).
    suggest : callable, optional
        ``suggest(name) -> str | None``: an entry that an unknown name means by another
        spelling (a job method named by its estimator's class); offered before the close
        match of the names.

    Examples
    --------
    >>> colours = Registry("colour", error=KeyError)
    >>> colours.register("red", 1)
    1
    >>> colours.lookup("rde")
    Traceback (most recent call last):
    ...
    KeyError: "unknown colour 'rde'. Did you mean 'red'? Valid colours: red."
    """

    def __init__(
        self,
        kind: str,
        *,
        error: Callable[[str], Exception],
        discover: str | None = None,
        suffix: str = "",
        suggest: Callable[[str], str | None] | None = None,
    ) -> None:
        self.kind = kind
        self._error = error
        self._discover = discover
        self._suffix = suffix
        self._suggest = suggest
        self._entries: dict[str, T] = {}
        self._discovered = discover is None

    def register(self, name: str, entry: T) -> T:
        """Add ``entry`` under ``name``; a name registered twice is a ``ValueError``."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests that register a temporary entry)."""
        del self._entries[name]

    def __delitem__(self, name: str) -> None:
        self.unregister(name)

    def load(self) -> None:
        """Import every module of the ``discover`` package once (registers the built-ins)."""
        if self._discovered:
            return
        self._discovered = True  # set first: the modules register while being imported
        try:
            module = importlib.import_module(self._discover)  # type: ignore[arg-type]
            for info in sorted(pkgutil.iter_modules(getattr(module, "__path__", [])), key=_name):
                if not info.name.startswith("_"):
                    importlib.import_module(f"{module.__name__}.{info.name}")
        except BaseException:
            self._discovered = False  # a broken module is reported again, not half-registered
            raise

    def names(self) -> list[str]:
        """The registered names, sorted."""
        self.load()
        return sorted(self._entries)

    def unknown_message(self, name: Any) -> str:
        """``unknown method 'x'. Did you mean 'y'? Valid methods: a, b.``"""
        from dkernel.schema.params import did_you_mean, show_value

        names = self.names()
        meant = self._suggest(name) if self._suggest and isinstance(name, str) else None
        hint = f" Did you mean {meant!r}?" if meant else did_you_mean(name, names)
        return (
            f"unknown {self.kind} {show_value(name)}.{hint} "
            f"Valid {self.kind}s: {', '.join(names)}{self._suffix}."
        )

    def lookup(self, name: Any) -> T:
        """The entry named ``name``; unknown names raise ``error`` with the valid names."""
        self.load()
        if not isinstance(name, str) or name not in self._entries:
            raise self._error(self.unknown_message(name))
        return self._entries[name]

    def __getitem__(self, name: str) -> T:
        self.load()
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        self.load()
        return iter(self._entries)

    def __len__(self) -> int:
        self.load()
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._entries

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._entries)})"
