"""Supersession as people write it, on either side (never a dependency).

On the old PR, :func:`successor_declarations`: ``Superseded by #N``, ``Replaced by #N``,
``Obsoleted by``, ``Succeeded by``, ``(Closing) in favor of`` / ``in favour of #N``, and a
pointer to the successor: ``Moved to``, ``Continued in``, ``Reopened as``, ``Resubmitted as``,
``New PR:`` / ``New version:`` REF. On the new PR, :func:`predecessor_declarations`:
``Supersedes #N``, ``Replaces #N``, ``Obsoletes #N``, ``Takes over (from) #N``, ``New version
of #N``, ``Redo of #N``, ``Reopened from #N``, ``Resubmission of #N``.

REF is read as :mod:`stackbot.domain.references` reads a list of references; quotes, code and
phrases negated just before (``not replaced by #5``) are not read, nor a reference followed by
``'s`` (``replaces #12's cache``, ``in favor of #12's approach``: a thing of that PR, not it).
"""

from __future__ import annotations

import re

from stackbot.domain.references import Reference, _refs_after_spans, prose

_SUCCESSOR = re.compile(
    r"\b(?:(?:superseded|replaced|obsoleted|succeeded)[ \t]+by"
    r"|in[ \t]+favou?r[ \t]+of"
    r"|(?:moved|continued|reopened|re-opened|resubmitted|re-submitted|recreated)[ \t]+"
    r"(?:to|in|as|at)(?:[ \t]+a[ \t]+new[ \t]+(?:PR|pull[ \t]+request))?"
    r"|new[ \t]+(?:PR|pull[ \t]+request|version)(?:[ \t]+is(?:[ \t]+here)?|[ \t]+here)?"
    r"(?=[ \t]*:))\b",
    re.IGNORECASE,
)
_PREDECESSOR = re.compile(
    r"\b(?:supersedes|replaces|obsoletes|takes[ \t]+over(?:[ \t]+from)?"
    r"|new[ \t]+version[ \t]+of|redo[ \t]+of|re-?opened[ \t]+from|re-?submission[ \t]+of)\b",
    re.IGNORECASE,
)
_POSSESSIVE = re.compile(r"['’]s\b")


def successor_declarations(text: str) -> list[tuple[Reference, str]]:
    """Each PR ``text`` names as the one that replaces the PR it is written on, with its words."""
    return _declarations(_SUCCESSOR, text)


def predecessor_declarations(text: str) -> list[tuple[Reference, str]]:
    """Each PR ``text`` names as one the PR it is written on replaces, with its words."""
    return _declarations(_PREDECESSOR, text)


def _declarations(phrase: re.Pattern[str], text: str) -> list[tuple[Reference, str]]:
    readable = prose(text)
    return [
        (ref, text[start:end].strip())
        for ref, start, end in _refs_after_spans(phrase, readable)
        if _POSSESSIVE.match(readable, end) is None
    ]
