"""References to other PRs written in PR bodies, comments and commit messages.

Phrases, case-insensitive, anywhere in a sentence or a list item:

- ``Depends on REF`` (also ``Depends-On: REF``): a dependency, see :func:`depends_on_refs`;
- ``Part of REF``: the tracking issue of a series (never a dependency), :func:`part_of_refs`;
- ``Superseded by REF``: the PR is replaced by another, :func:`superseded_by_refs`;
- ``Merge REF`` / ``Merge pull request REF`` in a commit message: the commit merges that PR's
  head, :func:`merged_head_refs`; ``Merge branch 'NAME'`` names a branch instead,
  :func:`merged_branches`.

REF is ``#N``, ``owner#N``, ``owner/name#N`` or a URL ``https://HOST/owner/name/pull/N``
(``/issues/N`` too), optionally written as a Markdown link ``[#N](URL)`` or after ``PR``. One
phrase may name several: the list goes on through commas, ``and``, ``&`` and spaces, and stops
at the first word that is not a reference, so ``Depends on #8034, which adds ...`` names only
#8034 while ``Depends on #1 and #2`` names both. Hard-wrapped text may break the line after the phrase or after a
comma or ``and``. A phrase ending its line may be followed by a bullet list of references
(``Depends on:`` / ``- #1`` / ``- #2``).

Not read, because they are not the author's declarations: quoted lines (``> ...``), fenced and
inline code, HTML comments (where PR templates keep their instructions), and phrases negated
just before (``no longer depends on #5``). A number glued to a word is no reference:
``#12abc`` and ``&#8034;`` name nothing (``abc#12`` is the ``owner#N`` form).

Which references are local (same repository) is decided by :meth:`Reference.is_local`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_OWNER = r"[A-Za-z0-9][A-Za-z0-9-]*"
_REPO = r"[A-Za-z0-9._-]+"
_LINK_ITEM = (
    r"\[[^\]\n]{0,200}\]\(https?://[^\s/()]+/(?P<l_owner>"
    + _OWNER
    + r")/(?P<l_name>"
    + _REPO
    + r")"
    r"/(?:pull|pulls|issues)/(?P<l_num>\d+)(?!\w)[^)\s]*\)"
)
_ITEM = (
    r"(?:[*_]{1,2}(?=\S))?"  # bold or italic around the reference
    r"(?:(?:the[ \t]+)?(?:PRs?|pull[ \t]+requests?)[ \t]*)?"
    r"(?:(?P<open>\[)?"
    r"(?:https?://[^\s/]+/(?P<u_owner>" + _OWNER + r")/(?P<u_name>" + _REPO + r")"
    r"/(?:pull|pulls|issues)/(?P<u_num>\d+)(?!\w)"
    r"|(?:(?P<owner>" + _OWNER + r")(?:/(?P<name>" + _REPO + r"))?)?#(?P<num>\d+)(?!\w))"
    r"(?(open)\](?:\([^)\s]*\))?)"
    r"|" + _LINK_ITEM + r"|(?<=PR )(?P<p_num>\d+)(?!\w)(?![.,]\d))"  # "PR 123"
    r"(?:[*_]{1,2})?"
)
# Hard-wrapped text may break a line after a phrase or a connective, never twice in a row.
_WRAP = r"(?:[ \t]*\n)?[ \t]*"
_SEPARATOR = (
    r"(?:[ \t]*," + _WRAP + r"(?:and(?:[ \t]+|[ \t]*\n[ \t]*))?"
    r"|" + _WRAP + r"(?:and|&|\+)(?:[ \t]+|[ \t]*\n[ \t]*)"
    r"|[ \t]*&[ \t]*"
    r"|[ \t]+)"
)
_FIRST = re.compile(_ITEM, re.IGNORECASE)
_NEXT = re.compile(_SEPARATOR + _ITEM, re.IGNORECASE)
# After the phrase: optional Markdown emphasis and a colon ("**Depends on**: #1").
_LEAD = re.compile(r"[ \t]*[*_]*[ \t]*(?P<colon>:)?[ \t]*[*_]*[ \t]*")
_LINE_BREAK = re.compile(r"\n[ \t]*")
_BULLET = re.compile(r"[ \t]*(?:[-*+]|\d+[.)])[ \t]+(?:\[[ xX]\][ \t]+)?")
_NEGATION = re.compile(r"(?:\bnot|\bno[ \t]+longer|\bnever|n't)[ \t]*$", re.IGNORECASE)

_PART_OF = re.compile(r"\bpart[ \t]+of\b", re.IGNORECASE)
_SUPERSEDED_BY = re.compile(r"\bsuperseded[ \t]+by\b", re.IGNORECASE)
_MERGE = re.compile(r"\bmerge\b", re.IGNORECASE)
_MERGE_BRANCH = re.compile(
    r"\bmerge[ \t]+(?P<tracking>remote-tracking[ \t]+)?branch(?:es)?[ \t]+"
    r"(?P<names>'[^'\n]+'(?:[ \t]*(?:,|and|,[ \t]*and)[ \t]*'[^'\n]+')*)",
    re.IGNORECASE,
)

# Commands to stackbot are read as commands (stackbot.domain.commands), never as declarations.
_COMMAND_LINE = re.compile(r" {0,3}/(?:stackbot|ok[ \t]+to[ \t]+test)\b", re.IGNORECASE)
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_INLINE_CODE = re.compile(r"(`+)(?!`)[^\n]*?(?<!`)\1(?!`)")
_QUOTED = re.compile(r"\"[^\"\n]{1,300}\"|\u201c[^\u201d\n]{1,300}\u201d")


@dataclass(frozen=True)
class Reference:
    """A PR or issue named in text: ``#N``, ``owner#N`` or ``owner/name#N``."""

    number: int
    owner: str | None = None
    name: str | None = None

    @property
    def text(self) -> str:
        if self.owner is None:
            return f"#{self.number}"
        if self.name is None:
            return f"{self.owner}#{self.number}"
        return f"{self.owner}/{self.name}#{self.number}"

    def is_local(self, repo: str | None) -> bool:
        """Whether the reference names a PR of ``repo`` (``owner/name``, or None if unknown).

        ``#N`` is always local and ``owner/name#N`` is local when it names ``repo``. GitHub
        renders a same-network reference as ``owner#N`` (``NVIDIA#8035`` in commit messages on
        NVIDIA/Megatron-LM), so ``owner#N`` is local when the owner is ``repo``'s owner. With no
        repository configured nothing can be compared: ``owner#N`` counts as local (that short
        form is only written within one repository network) and ``owner/name#N`` as external.
        Names compare case-insensitively, as GitHub's do.
        """
        if self.owner is None:
            return True
        if repo is None:
            return self.name is None
        owner, _, name = repo.partition("/")
        if self.owner.lower() != owner.lower():
            return False
        return self.name is None or self.name.lower() == name.lower()


@dataclass(frozen=True)
class BranchMerge:
    """A branch named by ``Merge branch 'NAME'`` (or ``Merge remote-tracking branch``)."""

    name: str
    remote_tracking: bool = False

    @property
    def candidate_names(self) -> tuple[str, ...]:
        """Branch names this may be: ``origin/x`` of a remote-tracking merge may mean ``x``."""
        if self.remote_tracking and "/" in self.name:
            return (self.name, self.name.split("/", 1)[1])
        return (self.name,)


def depends_on_refs(text: str) -> list[Reference]:
    """Every reference a dependency phrase names (``Depends on``, ``Stacked on``, ...: see
    :mod:`stackbot.domain.dependency_text`), in order of appearance."""
    from stackbot.domain.dependency_text import dependency_declarations

    return [
        found.ref
        for found in dependency_declarations(text)
        if found.ref is not None and found.child is None and not found.on_self
    ]


def part_of_refs(text: str) -> list[Reference]:
    """Every reference named by a ``Part of`` phrase (tracking issues), in order."""
    return _refs_after(_PART_OF, prose(text))


def superseded_by_refs(text: str) -> list[Reference]:
    """Every reference named by a ``Superseded by`` phrase, in order."""
    return _refs_after(_SUPERSEDED_BY, prose(text))


def superseded_by_declarations(text: str) -> list[tuple[Reference, str]]:
    """Each ``Superseded by`` reference with the exact words that wrote it."""
    return [
        (ref, text[start:end].strip())
        for ref, start, end in _refs_after_spans(_SUPERSEDED_BY, prose(text))
    ]


def merged_head_refs(message: str) -> list[Reference]:
    """PRs whose head a commit message says it merges (``Merge NVIDIA#8035's head``).

    Only the word ``merge`` itself starts a phrase: ``merges``, ``merged`` and ``merging``
    describe other commits. Commit messages are read as written (no Markdown to strip).
    """
    return _refs_after(_MERGE, message)


def merged_branches(message: str) -> list[BranchMerge]:
    """Branches a commit message says it merges (git's ``Merge branch 'x' into y``)."""
    found: list[BranchMerge] = []
    for match in _MERGE_BRANCH.finditer(message):
        tracking = match.group("tracking") is not None
        for name in re.findall(r"'([^'\n]+)'", match.group("names")):
            found.append(BranchMerge(name=name, remote_tracking=tracking))
    return found


def prose(text: str) -> str:
    """The text an author declares things in: no quotes, code or HTML comments.

    Removed parts become blanks of the same length (line breaks kept), so that words on either
    side do not join and a position in the result is the same position in ``text``. Removed:
    HTML comments, fenced and indented code blocks, inline code, lines quoted with ``>`` (as
    e-mail replies quote), text between double quotes on one line, and command lines
    (``/stackbot ...``, ``/ok to test ...``).
    """
    text = _HTML_COMMENT.sub(_blank, text)
    kept: list[str] = []
    fence: str | None = None
    in_list = False
    previous_blank = True
    in_indented_code = False
    for line in text.split("\n"):
        stripped = line.lstrip()
        marker = stripped[:3]
        indented = line.startswith(("    ", "\t"))
        if fence is not None:
            if marker == fence:
                fence = None
            kept.append(_blank_text(line))
            continue
        if marker in ("```", "~~~"):
            fence = marker
            kept.append(_blank_text(line))
        elif stripped and indented and (in_indented_code or (previous_blank and not in_list)):
            in_indented_code = True
            kept.append(_blank_text(line))
        elif stripped.startswith(">") or _COMMAND_LINE.match(line):
            kept.append(_blank_text(line))
        else:
            in_indented_code = in_indented_code and not stripped
            if stripped:
                if _BULLET.match(line):
                    in_list = True
                elif not indented:
                    in_list = False
            kept.append(_QUOTED.sub(_blank, _INLINE_CODE.sub(_blank, line)))
        previous_blank = not stripped
    return "\n".join(kept)


def _blank(match: re.Match[str]) -> str:
    return _blank_text(match.group(0))


def _blank_text(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def _refs_after(phrase: re.Pattern[str], text: str) -> list[Reference]:
    return [ref for ref, _, _ in _refs_after_spans(phrase, text)]


def _refs_after_spans(phrase: re.Pattern[str], text: str) -> list[tuple[Reference, int, int]]:
    """Each reference a phrase names, with where the phrase starts and its list ends."""
    refs: list[tuple[Reference, int, int]] = []
    for match in phrase.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if _NEGATION.search(text, line_start, match.start()):
            continue
        lead = _LEAD.match(text, match.end())
        assert lead is not None  # the lead pattern matches the empty string
        found, end = _ref_list(text, lead.end())
        if not found and _rest_of_line_is_blank(text, lead.end()):
            found, end = _bullet_refs_spans(text, lead.end())
            wrapped = _LINE_BREAK.match(text, lead.end())
            if not found and wrapped is not None:
                found, end = _ref_list(text, wrapped.end())
        refs.extend((ref, match.start(), end) for ref in found)
    return refs


def _ref_list(text: str, pos: int) -> tuple[list[Reference], int]:
    """References from ``pos`` on, joined by separators; and where the list stops."""
    found: list[Reference] = []
    item = _FIRST.match(text, pos)
    while item is not None:
        found.append(_reference(item))
        pos = item.end()
        item = _NEXT.match(text, pos)
    return found, pos


def _bullet_refs(text: str, pos: int) -> list[Reference]:
    return _bullet_refs_spans(text, pos)[0]


def _bullet_refs_spans(text: str, pos: int) -> tuple[list[Reference], int]:
    """References of the bullet list starting on the line after ``pos``; and where it ends."""
    found: list[Reference] = []
    end = pos
    line_end = text.find("\n", pos)
    while line_end != -1:
        bullet = _BULLET.match(text, line_end + 1)
        if bullet is None:
            break
        refs, end_of_refs = _ref_list(text, bullet.end())
        if not refs:
            break
        found.extend(refs)
        end = end_of_refs
        line_end = text.find("\n", bullet.end())
    return found, end


def _rest_of_line_is_blank(text: str, pos: int) -> bool:
    line_end = text.find("\n", pos)
    rest = text[pos:] if line_end == -1 else text[pos:line_end]
    return not rest.strip()


def _reference(match: re.Match[str]) -> Reference:
    if match.group("l_num") is not None:
        return Reference(
            number=int(match.group("l_num")),
            owner=match.group("l_owner"),
            name=match.group("l_name"),
        )
    if match.group("p_num") is not None:
        return Reference(number=int(match.group("p_num")))
    if match.group("u_num") is not None:
        return Reference(
            number=int(match.group("u_num")),
            owner=match.group("u_owner"),
            name=match.group("u_name"),
        )
    return Reference(
        number=int(match.group("num")), owner=match.group("owner"), name=match.group("name")
    )
