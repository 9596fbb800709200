"""Server paths never leave the machine: one rewrite of the text stackbot shows to others.

A job's runner log and its error text name the places this server keeps things (the data
directory, its mirrors and job directories, the runner's repository cache, Slurm's shared
directory). Where text leaves the machine it goes through :meth:`PathRedactor.redact`, which
puts a readable placeholder in the place of each such directory and keeps the rest of the
path::

    /srv/stackbot/jobs/job-12/runner.log            →  <data>/jobs/job-12/runner.log
    /srv/stackbot/runner-cache/trees/3f2a…          →  <runner-cache>/trees/3f2a…

Paths inside the tested repository (``tests/unit_tests/x.py``) are not server paths and stay.
The two boundaries that call it: the GitHub client's writes (comments, check runs, statuses,
pull requests: :mod:`stackbot.adapters.github.client`) and every answer of the web app (pages
and JSON: :mod:`stackbot.web.exposure`).
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# A directory's name ends where a path component's characters end.
_END = r"(?![A-Za-z0-9_.\-])"


class PathRedactor:
    """Replaces each known directory (as configured and as resolved) with its placeholder, the
    longest first, so that a directory inside another gets its own placeholder."""

    def __init__(self, places: Iterable[tuple[Path | str, str]]) -> None:
        spellings: dict[str, str] = {}
        for directory, placeholder in places:
            for form in _spellings(directory):
                if len(form) > 1:  # never "/" alone
                    spellings.setdefault(form, placeholder)
        ordered = sorted(spellings, key=len, reverse=True)
        self._placeholders = spellings
        self._pattern = (
            re.compile("|".join(_form_pattern(form) for form in ordered)) if ordered else None
        )

    @classmethod
    def from_settings(cls, settings: Any) -> PathRedactor:
        """The places of a :class:`stackbot.config.Settings` (typed loosely so this module
        stays at the bottom floor)."""
        places: list[tuple[Path | str, str]] = [
            (settings.runner_cache_dir, "<runner-cache>"),
            (settings.data_dir, "<data>"),
        ]
        shared = getattr(getattr(settings, "slurm", None), "shared_dir", None)
        if shared is not None:
            places.append((shared, "<shared>"))
        return cls(places)

    def redact(self, text: str, *, markup: bool = False) -> str:
        """``text`` with the places replaced; ``markup``: the text is HTML, and so is what
        takes their place (``&lt;data&gt;``)."""
        if self._pattern is None or not text:
            return text
        if markup:
            return self._pattern.sub(lambda m: html.escape(self._placeholder(m)), text)
        return self._pattern.sub(self._placeholder, text)

    def _placeholder(self, match: re.Match[str]) -> str:
        found = match.group(0)
        return self._placeholders.get(found) or self._placeholders[found.removeprefix("./")]

    def redact_value(self, value: Any) -> Any:
        """The same rewrite through the strings of a JSON-like value (dicts, lists)."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {key: self.redact_value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact_value(item) for item in value]
        return value


def _form_pattern(form: str) -> str:
    """A spelling as a pattern: a relative one only where no path goes on before it (so that
    ``data/demo/stackbot`` is not found inside ``tests/data/demo/stackbot``), with its ``./``."""
    start = "" if form.startswith("/") else r"(?<![A-Za-z0-9_.\-/])(?:\./)?"
    return f"{start}(?:{re.escape(form)}){_END}"


def _spellings(directory: Path | str) -> set[str]:
    """The ways a directory appears in text: as configured, absolute, resolved (symlinks such
    as /tmp → /private/tmp), relative to the working directory (``data/demo/stackbot``: a
    demo run with ``STACKBOT_DATA_DIR=data`` logs its mirrors so), and each of those as HTML
    and JSON write it. A relative spelling of one component is left out: "data" alone would
    match ordinary words."""
    raw = os.fspath(directory).rstrip("/") or "/"
    forms = {os.path.abspath(raw)}
    with contextlib.suppress(OSError, RuntimeError):
        forms.add(str(Path(raw).resolve()))
    relative = {raw} if not raw.startswith("/") else set()
    with contextlib.suppress(ValueError):
        relative.add(os.path.relpath(os.path.abspath(raw)))
    forms |= {
        form.removeprefix("./")
        for form in relative
        if not form.startswith("..") and "/" in form.removeprefix("./")
    }
    escaped = {html.escape(form) for form in forms} | {json.dumps(form)[1:-1] for form in forms}
    return {form for form in forms | escaped if form}
