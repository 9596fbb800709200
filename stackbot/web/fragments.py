"""Pieces of a page rendered once per content: a 500-PR series page is 1,500 per-PR pieces (its
stack-order node, its row of the PR table and of the test grid), and after a write to one PR
all but a few are the same as before.

A piece is kept under its macro's name and its arguments *frozen* (:func:`freeze`: every field
of every dataclass it reaches, recursively, as hashable values), so a kept piece is sent only
for arguments equal to those it was rendered from: exact whatever changed. An argument that
cannot be frozen (anything but plain values, enums, dates, tuples, lists, dicts and dataclasses)
is rendered each time.

A frozen dataclass's key is kept on the instance: the rows a page shares across builds
(:class:`stackbot.services.read_batch.SharedMemo`'s test cells and runs) are frozen once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from datetime import date, datetime, timedelta
from enum import Enum
from typing import Any

from markupsafe import Markup

_PLAIN = (int, float, bool, type(None), datetime, date, timedelta, bytes)
_KEY = "_stackbot_frozen"


class Unfreezable(TypeError):
    """An argument holds a value whose content cannot be known (an ORM row, an object)."""


class Frozen:
    """A value's content as hashable, with its hash computed once."""

    __slots__ = ("_hash", "value")

    def __init__(self, value: tuple[Any, ...]) -> None:
        self.value = value
        self._hash = hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, Frozen) and self._hash == other._hash and self.value == other.value
        )


def freeze(value: Any) -> Any:
    """``value``'s content as a hashable value equal only to an equal content's."""
    kind = type(value)
    if kind is str or kind in _PLAIN:
        return value
    if kind is tuple or kind is list:
        return (kind.__name__, *map(freeze, value))
    names = _FIELDS.get(kind)
    if names is None:
        if kind is dict:
            return ("dict", *((freeze(k), freeze(v)) for k, v in value.items()))
        if kind is set or kind is frozenset:
            return ("set", frozenset(map(freeze, value)))
        if isinstance(value, Enum):
            return (kind, value.value)
        if isinstance(value, str):  # Markup and other str kinds render differently from str
            return (kind, str(value))
        if not (is_dataclass(value) and not isinstance(value, type)):
            raise Unfreezable(f"cannot key a page piece on a {kind.__name__}")
        names = _FIELDS[kind] = (
            tuple(f.name for f in fields(value)),
            kind.__dataclass_params__.frozen and hasattr(value, "__dict__"),
        )
    attributes, keep = names
    if keep:
        kept = value.__dict__.get(_KEY)
        if kept is not None:
            return kept
    frozen = Frozen((kind, *(freeze(getattr(value, name)) for name in attributes)))
    if keep:
        object.__setattr__(value, _KEY, frozen)
    return frozen


# A dataclass's field names, and whether its frozen key is kept on its instances (frozen, with
# a __dict__), by class.
_FIELDS: dict[type, tuple[tuple[str, ...], bool]] = {}


class Fragments:
    """Rendered pieces by (name, frozen arguments); at most ``max_pieces``, all dropped at once
    past that (a page's pieces are rendered again on its next build)."""

    def __init__(self, max_pieces: int = 50_000) -> None:
        self._pieces: dict[tuple[str, Any], Markup] = {}
        self._lock = threading.Lock()
        self._max = max_pieces
        self.rendered = 0

    def piece(self, name: str, render: Callable[..., Markup], *args: Any) -> Markup:
        """``render(*args)``, or the piece kept for equal arguments."""
        try:
            key = (name, freeze(args))
        except Unfreezable:
            return render(*args)
        found = self._pieces.get(key)
        if found is None:
            found = render(*args)
            self.rendered += 1
            with self._lock:
                if len(self._pieces) >= self._max:
                    self._pieces.clear()
                self._pieces[key] = found
        return found
