"""Who a dependency sentence is about, and the dependency sentences that are not one phrase.

:mod:`stackbot.domain.dependency_text` calls these on the readable text
(:func:`~stackbot.domain.references.prose`), where a position is the same as in the raw text:

- :func:`subject_before`: the PR a phrase's sentence is about when it is not the PR whose text
  it is: ``since #A depends on #B`` (A → B), ``#A, which is stacked on #B``, ``#M is blocked on
  this``;
- :func:`on_self_at`: ``this``, ``this PR``, ``this one``, ``it`` right after a phrase (the
  parent is the PR whose text it is: ``#M is blocked on this`` declares M → this PR);
- :func:`says_now`: ``now`` in the words before a phrase (``Now dependent on #N``): the statement
  replaces the earlier ones;
- :func:`lead_in_lists`: a lead-in line (``Dependencies``, ``These should be merged first:``,
  ``This PR is on hold until the following are merged:``, ...) and the list under it, a blank
  line between allowed, items ``#N``, a PR URL or a task-list item (``- [x] #N``);
- :func:`merge_order_stories`: ``first #A goes in, then #B, then this one``: each PR depends on
  the one told before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stackbot.domain.references import _BULLET, _FIRST, Reference, _ref_list, _reference

# Between a reference and the phrase after it when the reference is the sentence's subject.
_SUBJECT_GAP = re.compile(
    r"(?:[ \t]*,[ \t]*(?:which|that)\b)?"
    r"(?:[ \t]+(?:also|still|itself|now|is|are|currently|actually|in[ \t]+turn|really|then))*"
    r"[ \t]*$",
    re.IGNORECASE,
)
_SENTENCE_START = re.compile(r"[.!?;:]\s|\n")
_SELF = re.compile(
    r"(?:[*_]{1,2})?(?:this(?:[ \t]+(?:PR|pull[ \t]+request|one|change))?|it)\b(?!['’]s)",
    re.IGNORECASE,
)
# "now also needs #N" adds to what was said; "now depends on #N" replaces it.
_NOW = re.compile(r"\bnow\b(?![ \t]+(?:also|too|additionally)\b)[^.;!?\n]{0,30}$", re.IGNORECASE)

_LEAD_IN = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]+)?[*_]*[ \t]*(?:"
    r"dependencies|depends[ \t]+on|dependent[ \t]+on|prerequisites?|prereqs?|blocked[ \t]+(?:by|on)"
    r"|requires|(?:these|the[ \t]+following|those)(?:[ \t]+(?:PRs|pull[ \t]+requests))?"
    r"[ \t]+(?:should|must|need[ \t]+to|have[ \t]+to|are[ \t]+to)[ \t]+(?:be[ \t]+)?"
    r"(?:merged|landed|land|go[ \t]+in|reviewed[ \t]+and[ \t]+merged)[ \t]+first"
    r"|merge[ \t]+(?:these|the[ \t]+following)(?:[ \t]+PRs)?[ \t]+first"
    r"|(?:this[ \t]+(?:PR|pull[ \t]+request)[ \t]+is[ \t]+)?(?:on[ \t]+hold|blocked|waiting)"
    r"[ \t]+(?:until|till|for|on)\b[^\n]{0,80}?"
    r")[ \t]*[*_]*[ \t]*:?[ \t]*[*_]*[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_CHECKBOX = re.compile(r"\[[ xX]\][ \t]+")

_ORDER_WORD = re.compile(
    r"\b(?P<word>first(?:ly)?|then|next|after[ \t]+that|finally|last(?:ly)?)\b[ \t,:]*"
    r"(?:(?:we[ \t]+|you[ \t]+|I[ \t]+)?(?:merge|land|get)[ \t]+)?",
    re.IGNORECASE,
)
_MERGE_WORDS = re.compile(
    r"\b(?:merge[sd]?|merging|land(?:s|ed)?|go(?:es)?[ \t]+in|gets?[ \t]+in)\b", re.IGNORECASE
)
_STORY_GAP = 80  # characters from one told PR to the next order word


def subject_before(readable: str, start: int) -> Reference | None:
    """The PR the sentence ending at ``start`` is about, when it is written just before the
    phrase (``#A depends on``, ``since #A, which is based on``); None otherwise."""
    sentence = _sentence_start(readable, start)
    last = None
    for found in _FIRST.finditer(readable, sentence, start):
        last = found
    if last is None or _SUBJECT_GAP.match(readable[last.end() : start]) is None:
        return None
    return _reference(last)


def _sentence_start(readable: str, pos: int) -> int:
    line_start = readable.rfind("\n", 0, pos) + 1
    begin = line_start
    for found in _SENTENCE_START.finditer(readable, line_start, pos):
        begin = found.end()
    return begin


def on_self_at(readable: str, pos: int) -> int | None:
    """Where ``this`` / ``this PR`` / ``it`` at ``pos`` ends; None when it is not there."""
    found = _SELF.match(readable, pos)
    return found.end() if found is not None else None


def says_now(readable: str, start: int) -> bool:
    line_start = readable.rfind("\n", 0, start) + 1
    return _NOW.search(readable, line_start, start) is not None


@dataclass(frozen=True)
class ListUnderLeadIn:
    refs: tuple[Reference, ...]
    start: int  # the lead-in line
    end: int  # the end of the list's last reference


def lead_in_lists(readable: str) -> list[ListUnderLeadIn]:
    """The references listed under each lead-in line (one blank line may come between)."""
    found: list[ListUnderLeadIn] = []
    for lead in _LEAD_IN.finditer(readable):
        refs, end = _list_after(readable, lead.end())
        if refs:
            found.append(ListUnderLeadIn(tuple(refs), lead.start(), end))
    return found


def _list_after(readable: str, pos: int) -> tuple[list[Reference], int]:
    refs: list[Reference] = []
    end = pos
    line_end = pos
    blank_allowed = True
    while line_end < len(readable):
        line_start = line_end + 1
        next_end = readable.find("\n", line_start)
        next_end = len(readable) if next_end == -1 else next_end
        line = readable[line_start:next_end]
        if not line.strip():
            if refs or not blank_allowed:
                break
            blank_allowed = False
            line_end = next_end
            continue
        bullet = _BULLET.match(readable, line_start)
        if bullet is None:
            break
        item = bullet.end()
        box = _CHECKBOX.match(readable, item)
        item = box.end() if box is not None else item
        listed, list_end = _ref_list(readable, item)
        if not listed:
            break
        refs.extend(listed)
        end = list_end
        line_end = next_end
    return refs, end


@dataclass(frozen=True)
class Told:
    """One PR of a merge-order story: a reference, or None for the PR whose text it is."""

    ref: Reference | None
    start: int
    end: int


def merge_order_stories(readable: str) -> list[tuple[int, list[Told]]]:
    """Each ``first X ..., then Y ..., then Z`` story that speaks of merging, in order, with
    where its ``first`` is."""
    stories: list[tuple[int, list[Told]]] = []
    pos = 0
    while True:
        first = _ORDER_WORD.search(readable, pos)
        if first is None:
            return stories
        pos = first.end()
        if not first.group("word").lower().startswith("first"):
            continue
        told = _told_at(readable, first.end())
        if told is None:
            continue
        story = [told]
        while True:
            following = _ORDER_WORD.search(readable, story[-1].end)
            if following is None or following.group("word").lower().startswith("first"):
                break
            gap = readable[story[-1].end : following.start()]
            if len(gap) > _STORY_GAP or "\n\n" in gap:
                break
            told = _told_at(readable, following.end())
            if told is None:
                break
            story.append(told)
        told_from = readable.rfind("\n", 0, first.start()) + 1  # "Merge order: first ..."
        if len(story) >= 2 and _MERGE_WORDS.search(readable[told_from : story[-1].end + 40]):
            stories.append((first.start(), story))
            pos = story[-1].end
    return stories


def _told_at(readable: str, pos: int) -> Told | None:
    ref = _FIRST.match(readable, pos)
    if ref is not None:
        return Told(_reference(ref), pos, ref.end())
    own = _SELF.match(readable, pos)
    if own is not None and own.group(0).lower() != "it":
        return Told(None, pos, own.end())
    return None
