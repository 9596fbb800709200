"""Dependencies as people write them in a PR's body or their own comments.

:func:`dependency_declarations` finds every dependency a text declares, each with the exact
words that declared it (so a wrong edge can be traced to its sentence and corrected):

- Phrases, in any case, with or without a colon, in bold, in a list or task-list item, several
  in one sentence: ``Depends on``, ``Stacked on (top of)``, ``Based on (top of)``, ``Builds
  on (top of)`` / ``Built on``, ``On top of``, ``Rebased on``, ``Requires`` / ``Needs`` (``#N to
  be merged first``), ``Blocked by`` / ``Blocked on``, ``Follow-up to`` (``of``, ``on``,
  ``for``, ``from``), ``Prerequisite`` / ``Parent PR`` / ``Base PR``, and ``After #N is merged``
  (``lands``, ``goes in``; ``Merge after #N`` needs no verb). What follows is a list of
  references as :mod:`stackbot.domain.references` reads them (``#N``, ``owner/name#N``, a PR
  URL, ``PR N``, a Markdown link) or a branch name: `` `feature/x` ``, ``branch x``, or a bare
  name holding a ``/`` — the caller resolves a branch to the open PR whose head it is.
- Stack lists (:mod:`stackbot.domain.stack_lists`): the lists ghstack, spr, Graphite, stax and
  Sapling write, and hand-written ones; the PR depends on the entry next to it toward the base.

Not read: what :func:`~stackbot.domain.references.prose` removes (quotes, ``>`` replies, code,
HTML comments, double-quoted text), and phrases negated in the words just before them (``not``,
``no longer``, ``never``, ``n't``, ``instead of``, ``rather than``, ``previously``,
``formerly``, ``used to``, ``was``). ``Depends-On-NOT: #5`` names nothing.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, replace

from stackbot.domain.dependency_sentences import (
    lead_in_lists,
    merge_order_stories,
    on_self_at,
    says_now,
    subject_before,
)
from stackbot.domain.references import (
    _LEAD,
    _LINE_BREAK,
    Reference,
    _bullet_refs_spans,
    _ref_list,
    _rest_of_line_is_blank,
    prose,
)

MAX_TEXT = 500  # characters of the declaring text kept with an edge


@dataclass(frozen=True)
class Declared:
    """One dependency written in text: a PR reference or a branch name, and the exact words."""

    text: str
    ref: Reference | None = None
    branch: str | None = None
    kind: str = "phrase"  # "phrase", "stack list", "lead-in list" or "merge order"
    # Who depends: None for the PR whose text it is; "since #A depends on #B" names #A.
    child: Reference | None = None
    # The parent is the PR whose text it is ("#M is blocked on this"); ref and branch are None.
    on_self: bool = False
    # "Now depends on #N": this statement replaces the earlier ones of the same PR.
    replaces_earlier: bool = False


_WS = r"[ \t]+"
_PHRASE = re.compile(
    r"\b(?:"
    r"depends?(?:" + _WS + r"|-)(?:up)?on"
    r"|dependent(?:" + _WS + r"|-)(?:up)?on"
    r"|(?:stacked|based|built|builds?|rebased)"
    + _WS
    + r"(?:up)?on(?:"
    + _WS
    + r"top"
    + _WS
    + r"of)?"
    r"|on" + _WS + r"top" + _WS + r"of"
    r"|requires?|needs"
    r"|blocked" + _WS + r"(?:by|on)"
    r"|follow(?:s|ing)?[- \t]?ups?(?:"
    + _WS
    + r"(?:PR|pull"
    + _WS
    + r"request))?"
    + _WS
    + r"(?:to|of|on|for|from)"
    r"|prerequisites?|prereqs?|parent" + _WS + r"PRs?|base" + _WS + r"PR"
    r"|(?P<merge>(?:merge|land)" + _WS + r"(?:this" + _WS + r")?(?:only" + _WS + r")?)?"
    r"(?P<after>after|once)"
    r")\b",
    re.IGNORECASE,
)
# "After #5 is merged": the verb that makes "after" a dependency.
_MERGED_VERB = re.compile(
    r"[ \t]*(?:(?:is|gets|has[ \t]+been|have[ \t]+been|are|get)[ \t]+)?"
    r"(?:merged|landed|lands?|in\b|goes[ \t]+in|go[ \t]+in)",
    re.IGNORECASE,
)
_NEGATED = re.compile(
    r"(?:\bnot|\bno[ \t]+longer|\bnever|n't|\binstead[ \t]+of|\brather[ \t]+than|\bpreviously"
    r"|\bformerly|\bused[ \t]+to|\bwas|\bwere|\bno[ \t]+more)\b[^.,;:!?\n]{0,24}$",
    re.IGNORECASE,
)
_NOT_AFTER = re.compile(r"-?[ \t]*not\b", re.IGNORECASE)
_CODE_BRANCH = re.compile(r"(?:the[ \t]+)?(?:branch[ \t]+)?`(?P<name>[^`\s]{1,255})`")
_WORD_BRANCH = re.compile(
    r"(?:the[ \t]+)?branch[ \t]+(?P<name>[A-Za-z0-9._/-]{0,254}[A-Za-z0-9_/-])(?![\w/])"
)
_SLASH_BRANCH = re.compile(r"(?P<name>[A-Za-z0-9._-]+/[A-Za-z0-9._/-]*[A-Za-z0-9_-])(?![\w/:])")
_GIT_REF = re.compile(r"[A-Za-z0-9._/-]+")


def dependency_declarations(text: str) -> list[Declared]:
    """Every dependency ``text`` declares in a phrase, a list under a lead-in line or a
    merge-order story, in order (stack lists: see
    :func:`stackbot.domain.stack_lists.stack_list_parent`)."""
    readable = prose(text)
    found: list[tuple[int, Declared]] = []
    covered: set[tuple[int, Reference]] = set()
    for match in _PHRASE.finditer(readable):
        if _is_negated(readable, match):
            continue
        declared = _declared_after(text, readable, match)
        if not declared:
            continue
        subject = subject_before(readable, match.start())
        now = says_now(readable, match.start())
        for one in declared:
            if one.on_self and subject is None:
                continue  # "depends on this" about nobody named
            one = replace(one, child=subject, replaces_earlier=now)
            found.append((match.start(), one))
            if one.ref is not None:
                covered.add((readable.rfind("\n", 0, match.start()), one.ref))
    for listed in lead_in_lists(readable):
        words = clip_span(text, listed.start, listed.end)
        line_before = readable.rfind("\n", 0, listed.start)
        for ref in listed.refs:
            if (line_before, ref) not in covered:
                found.append((listed.start, Declared(text=words, ref=ref, kind="lead-in list")))
    for story_start, story in merge_order_stories(readable):
        words = clip_span(text, story_start, story[-1].end)
        for earlier, later in itertools.pairwise(story):
            found.append(
                (
                    earlier.start,
                    Declared(
                        text=words,
                        ref=earlier.ref,
                        kind="merge order",
                        child=later.ref,
                        on_self=earlier.ref is None,
                    ),
                )
            )
    found.sort(key=lambda item: item[0])
    return [one for _, one in found]


def _is_negated(readable: str, match: re.Match[str]) -> bool:
    line_start = readable.rfind("\n", 0, match.start()) + 1
    if _NEGATED.search(readable, line_start, match.start()):
        return True
    return _NOT_AFTER.match(readable, match.end()) is not None


def _declared_after(text: str, readable: str, match: re.Match[str]) -> list[Declared]:
    lead = _LEAD.match(readable, match.end())
    assert lead is not None  # the lead pattern matches the empty string
    start = lead.end()
    spans, end = _ref_list(readable, start)
    if not spans and _rest_of_line_is_blank(readable, start):
        spans, end = _bullet_refs_spans(readable, start)
        wrapped = _LINE_BREAK.match(readable, start)
        if not spans and wrapped is not None:
            spans, end = _ref_list(readable, wrapped.end())
    if match.group("after") is not None:
        if not spans or (match.group("merge") is None and not _MERGED_VERB.match(readable, end)):
            return []
        verb = _MERGED_VERB.match(readable, end)
        end = verb.end() if verb is not None else end
    if spans:
        words = clip_span(text, match.start(), end)
        return [Declared(text=words, ref=ref) for ref in spans]
    if match.group("after") is not None:
        return []
    own_end = on_self_at(readable, start)
    if own_end is not None:
        return [Declared(text=clip_span(text, match.start(), own_end), on_self=True)]
    raw_lead = _LEAD.match(text, match.end())  # in text, code spans are still there
    assert raw_lead is not None
    branch = _branch_at(text, readable, raw_lead.end())
    if branch is None:
        return []
    name, branch_end = branch
    return [Declared(text=clip_span(text, match.start(), branch_end), branch=name)]


def _branch_at(text: str, readable: str, pos: int) -> tuple[str, int] | None:
    """A branch name at ``pos``: in backticks (read from ``text``, where code is kept), after
    the word ``branch``, or bare when it holds a ``/`` (``feature/x``)."""
    for pattern, source in ((_CODE_BRANCH, text), (_WORD_BRANCH, readable)):
        found = pattern.match(source, pos)
        if found is not None and _is_branch_name(found.group("name")):
            return found.group("name"), found.end()
    bare = _SLASH_BRANCH.match(readable, pos)
    if bare is not None and _is_branch_name(bare.group("name")):
        return bare.group("name"), bare.end()
    return None


def _is_branch_name(name: str) -> bool:
    return (
        _GIT_REF.fullmatch(name) is not None
        and not name.startswith(("-", "/", "."))
        and ".." not in name
        and not name.endswith((".", "/", ".lock"))
    )


def clip_span(text: str, start: int, end: int) -> str:
    return clip(text[start:end])


def clip(words: str) -> str:
    """Declaring text as kept with an edge: stripped, no NUL, at most ``MAX_TEXT`` characters."""
    words = words.strip().replace("\x00", "\ufffd")
    return words if len(words) <= MAX_TEXT else words[: MAX_TEXT - 1] + "…"
