"""Reading JSON objects field by field, so every contract error names the field at fault."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class ContractError(ValueError):
    """A spec, result or test-set file that does not follow the contract; names the field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def parse_version(value: object, field: str, supported_major: int) -> tuple[int, int]:
    text = str(value)
    major, _, minor = text.partition(".")
    if not (major.isdigit() and (minor.isdigit() or minor == "")):
        raise ContractError(field, f"{text!r} is not a 'MAJOR.MINOR' version")
    if int(major) != supported_major:
        raise ContractError(
            field,
            f"major version {major} is not supported by this gpu_jobs (it reads "
            f"{supported_major}.x); install the gpu_jobs that matches the sender",
        )
    return int(major), int(minor or 0)


class FieldReader:
    """Typed access to one JSON object; ``where`` prefixes field names in errors."""

    def __init__(self, data: object, where: str = "") -> None:
        if not isinstance(data, Mapping):
            raise ContractError(where or "<root>", f"expected a JSON object, got {_kind(data)}")
        self._data: Mapping[str, Any] = data
        self._where = where
        self._seen: set[str] = set()

    @property
    def where(self) -> str:
        return self._where or "<root>"

    def name(self, key: str) -> str:
        return f"{self._where}.{key}" if self._where else key

    def has(self, key: str) -> bool:
        return self._data.get(key) is not None

    def raw(self, key: str, default: Any = None) -> Any:
        self._seen.add(key)
        return self._data.get(key, default)

    def required(self, key: str) -> Any:
        self._seen.add(key)
        if self._data.get(key) is None:
            raise ContractError(self.name(key), "is required")
        return self._data[key]

    def text(self, key: str, default: str | None = None) -> str:
        value = self.raw(key, default) if default is not None else self.required(key)
        if not isinstance(value, str):
            raise ContractError(self.name(key), f"expected a string, got {_kind(value)}")
        return value

    def opt_text(self, key: str) -> str | None:
        value = self.raw(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise ContractError(self.name(key), f"expected a string or null, got {_kind(value)}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise ContractError(self.name(key), f"expected true or false, got {_kind(value)}")
        return value

    def integer(self, key: str, default: int | None = None) -> int:
        value = self.raw(key, default) if default is not None else self.required(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ContractError(self.name(key), f"expected an integer, got {_kind(value)}")
        return value

    def opt_integer(self, key: str) -> int | None:
        return None if self.raw(key) is None else self.integer(key)

    def number(self, key: str, default: float | None = None) -> float:
        value = self.raw(key, default) if default is not None else self.required(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ContractError(self.name(key), f"expected a number, got {_kind(value)}")
        return float(value)

    def texts(self, key: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        value = self.raw(key, list(default))
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ContractError(self.name(key), "expected a list of strings")
        return tuple(value)

    def integers(self, key: str) -> tuple[int, ...]:
        value = self.raw(key, [])
        if not isinstance(value, list) or not all(
            isinstance(item, int) and not isinstance(item, bool) for item in value
        ):
            raise ContractError(self.name(key), "expected a list of integers")
        return tuple(value)

    def text_map(self, key: str) -> dict[str, str]:
        value = self.raw(key, {})
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise ContractError(self.name(key), "expected an object of string values")
        return dict(value)

    def count_map(self, key: str) -> dict[str, int]:
        """An object of positive integers, such as ``{"tests/x.py": 8}``."""
        value = self.raw(key, {})
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and k.strip() and type(v) is int and v >= 1 for k, v in value.items()
        ):
            raise ContractError(self.name(key), "expected an object of positive integers")
        return dict(value)

    def obj(self, key: str) -> FieldReader:
        return FieldReader(self.raw(key, {}), self.name(key))

    def objects(self, key: str) -> list[FieldReader]:
        value = self.raw(key, [])
        if not isinstance(value, list):
            raise ContractError(self.name(key), f"expected a list, got {_kind(value)}")
        return [FieldReader(item, f"{self.name(key)}[{i}]") for i, item in enumerate(value)]

    def refuse_unknown(self) -> None:
        unknown = sorted(set(self._data) - self._seen)
        if unknown:
            raise ContractError(self.name(unknown[0]), "is not a known field (misspelt?)")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def choice(value: str, choices: tuple[str, ...], name: str) -> str:
    if value not in choices:
        raise ContractError(name, f"{value!r} is not one of {', '.join(choices)}")
    return value


def loads_json(text: str, what: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ContractError("<json>", f"the {what} is not valid JSON: {exc}") from None
    except RecursionError:  # arrays or objects nested past what the parser can follow
        raise ContractError(
            "<json>", f"the {what} nests arrays or objects too deeply to be read"
        ) from None
