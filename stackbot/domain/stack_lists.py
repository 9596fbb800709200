"""Stack lists: a list of the PRs of a stack, one per item, that marks "this PR".

Stack tools write them into the PR body or a comment: ghstack (``Stack from ghstack (oldest at
bottom):`` and ``__->__`` before this PR), Sapling (``Stack created with Sapling``, the same
``__->__``), spr (``**Stack**:`` and ``⬅`` after this PR), Graphite (``👈`` after this PR, the
trunk branch last, "managed by Graphite"; its older comment nests the list, trunk first) and
stax (its stack section, trunk last). People write their own: a bulleted or numbered list of PRs
with ``← this PR``, ``(this one)``, ``👈``, ``<-`` or ``you are here`` on one entry.

A list counts when it has at least two PR entries, one of them this PR (by number), and either a
"this PR" marker on that entry or a line just before or after it that speaks of a stack
(``stack``, ``ghstack``, ``spr``, ``Graphite``, ``Sapling``, ``stax``, ``dependencies``).
Each entry depends on the next one toward the base, so this PR depends on its neighbour on the
base side (none when that neighbour is a branch such as `` `main` ``).

Which end is the base, first rule that applies:

1. what the text says: ``oldest at bottom``, ``newest first``, ``base at bottom``, ``bottom
   to top`` (base last) or ``oldest at top``, ``oldest first``, ``merge order``, ``base first``,
   ``top to bottom`` (base first);
2. an end entry that is a branch, not a PR (`` `main` ``), or a merged PR is the base;
3. a nested list whose entries go deeper line by line starts at the base;
4. a list written by a stack tool (ghstack, Sapling, spr, Graphite, stax): the base is last;
5. otherwise (hand-written) the first entry is the base: people list a stack in merge order.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from stackbot.domain.dependency_text import Declared, clip, dependency_declarations
from stackbot.domain.references import _FIRST, Reference, _reference, prose

_ITEM_LINE = re.compile(r"^(?P<indent>[ \t]*)(?:[-*+]|\d+[.)])[ \t]+(?:\[[ xX]\][ \t]+)?\S")
_NUMBERED = re.compile(r"^[ \t]*\d+[.)]")
_MARKER = re.compile(
    r"👈|⬅|←|<-+|__->__|-->|\bthis[ \t]+(?:PR|pull[ \t]+request|one|change)\b"
    r"|\byou[ \t]+are[ \t]+here\b|\(current\)|\bcurrent[ \t]+PR\b",
    re.IGNORECASE,
)
_STACK_WORDS = re.compile(
    r"\bstack|ghstack|\bspr\b|graphite|sapling|\bstax\b|\bdependencies\b|\bPR[ \t]+chain\b",
    re.IGNORECASE,
)
_TOOL = re.compile(r"ghstack|sapling|graphite|\bspr\b|ejoffe/spr|\bstax\b", re.IGNORECASE)
_BASE_LAST = re.compile(
    r"oldest[ \t]+(?:at[ \t]+(?:the[ \t]+)?)?bottom|newest[ \t]+(?:first|(?:at[ \t]+)?(?:the[ \t]+)?top)"
    r"|base[ \t]+(?:at[ \t]+(?:the[ \t]+)?bottom|last)|bottom[ \t]+(?:to|->|→)[ \t]+top"
    r"|top[ \t]+(?:is[ \t]+)?(?:the[ \t]+)?newest|bottom[ \t]+(?:is[ \t]+)?(?:the[ \t]+)?oldest",
    re.IGNORECASE,
)
_BASE_FIRST = re.compile(
    r"oldest[ \t]+(?:first|(?:at[ \t]+)?(?:the[ \t]+)?top)|newest[ \t]+(?:last|(?:at[ \t]+)?"
    r"(?:the[ \t]+)?bottom)|merge[ \t]+order|base[ \t]+(?:first|(?:at[ \t]+)?(?:the[ \t]+)?top)"
    r"|top[ \t]+(?:to|->|→)[ \t]+bottom|in[ \t]+order[ \t]+of[ \t]+merging",
    re.IGNORECASE,
)
# Tools that write their list on every PR of the stack: each PR's own list speaks for it.
_EVERY_PR_TOOL = re.compile(r"ghstack|sapling|graphite|\bspr\b|ejoffe/spr|__->__", re.IGNORECASE)
_MERGED = re.compile(r"\bmerged\b|✅|~~", re.IGNORECASE)
_CONTEXT_LINES = 2


@dataclass(frozen=True)
class _Entry:
    line: int  # index in the text's lines
    start: int  # offset of the line in the text
    end: int
    indent: int
    ref: Reference | None  # None: not a PR (a branch such as `main`)
    raw: str
    readable: str


def stack_list_parents(text: str, number: int) -> list[Declared]:
    """What PR ``number`` depends on according to the stack lists in ``text``."""
    return [found for found in stack_list_edges(text, number) if found.child is None]


def stack_list_edges(text: str, number: int) -> list[Declared]:
    """Every edge the stack lists in ``text`` (on PR ``number``) show: this PR's parent (``child``
    None) and, for a hand-written or stax list that describes the whole stack, each other entry's
    dependency on its neighbour toward the base (``child`` that entry). The tools that write
    their list on every PR of the stack (ghstack, Sapling, spr, Graphite) speak for this PR only.
    """
    readable = prose(text)
    lines = readable.split("\n")
    raw_lines = text.split("\n")
    found: list[Declared] = []
    for run in _runs(lines, raw_lines):
        found.extend(_edges_in(run, raw_lines, number, text))
    return found


def _runs(lines: list[str], raw_lines: list[str]) -> list[list[_Entry]]:
    runs: list[list[_Entry]] = []
    current: list[_Entry] = []
    offset = 0
    for index, (line, raw) in enumerate(zip(lines, raw_lines, strict=True)):
        item = _ITEM_LINE.match(line) or _ITEM_LINE.match(raw) if line.strip() else None
        if item is not None:
            ref_match = _FIRST.search(line)
            current.append(
                _Entry(
                    line=index,
                    start=offset,
                    end=offset + len(raw),
                    indent=len(item.group("indent").expandtabs(4)),
                    ref=_reference(ref_match) if ref_match is not None else None,
                    raw=raw,
                    readable=line,
                )
            )
        elif current:
            runs.append(current)
            current = []
        offset += len(raw) + 1
    if current:
        runs.append(current)
    return runs


def _edges_in(run: list[_Entry], raw_lines: list[str], number: int, text: str) -> list[Declared]:
    prs = [entry for entry in run if entry.ref is not None]
    own = [e for e in prs if e.ref is not None and e.ref.number == number and e.ref.owner is None]
    own = own or [e for e in prs if e.ref is not None and e.ref.number == number]
    if len(prs) < 2 or len(own) != 1:
        return []
    me = own[0]
    first, last = run[0].line, run[-1].line
    context = "\n".join(
        raw_lines[max(0, first - _CONTEXT_LINES) : first]
        + raw_lines[last + 1 : last + 1 + _CONTEXT_LINES + 1]
    )
    if not (_MARKER.search(me.raw) or _STACK_WORDS.search(context)):
        return []
    base_first = _base_is_first(run, context, text)
    whole = _MARKER.search(me.raw) is not None and _EVERY_PR_TOOL.search(text) is None
    found: list[Declared] = []
    for upper, lower in itertools.pairwise(run):
        child, parent = (lower, upper) if base_first else (upper, lower)
        if child.ref is None or parent.ref is None:
            continue  # the base branch
        if child is not me and (not whole or _MERGED.search(child.raw)):
            continue
        found.append(
            Declared(
                text=clip(text[upper.start : lower.end]),
                ref=parent.ref,
                kind="stack list",
                child=None if child is me else child.ref,
            )
        )
    return found


def _base_is_first(run: list[_Entry], context: str, text: str) -> bool:
    if _BASE_LAST.search(context):
        return False
    if _BASE_FIRST.search(context):
        return True
    top, bottom = run[0], run[-1]
    if top.ref is None or _MERGED.search(top.raw):
        return True
    if bottom.ref is None or _MERGED.search(bottom.raw):
        return False
    if all(a.indent < b.indent for a, b in itertools.pairwise(run)):
        return True
    return _TOOL.search(text) is None


def declares_dependency(text: str, number: int) -> bool:
    """Whether ``text`` (on PR ``number``) declares any dependency, in a phrase or a stack list."""
    return bool(dependency_declarations(text) or stack_list_parents(text, number))
