"""Dependencies as people write them, round three (issue 28): lists under a lead-in line,
variants of known phrases, supersession in other words, who a sentence is about, declarations
written on the parent, merge-order stories and stack lists that describe the whole stack.

Written by the team in the manner of real PR threads; not copied from any project. Every case is
a set of PRs of ``acme/trainer`` — #1190, #1199, #1201, #1202, #1203, #1204 (alice's, the one
whose texts a case gives unless it says otherwise) and #1205 — with their texts, and what a
reader takes from them: every edge (child, parent) among them and every supersession (old, new).
``tests/series/test_round_three.py`` runs the cases; ``benchmarks/dependency_phrasings.py``
measures them (also against older code).
"""

from __future__ import annotations

from dataclasses import dataclass

from stackbot.domain.records import CommentRecord, PrRecord
from stackbot.domain.types import PrNumber

REPO = "acme/trainer"
OWN = 1204
URL = "https://github.com/acme/trainer/pull/"
NUMBERS = (1190, 1199, 1201, 1202, 1203, 1204, 1205)


@dataclass(frozen=True)
class Case:
    id: str
    pattern: int  # the pattern number (0: a guard that must give nothing)
    body: str
    edges: frozenset[tuple[int, int]] = frozenset()
    superseded: frozenset[tuple[int, int]] = frozenset()  # (old, new)
    title: str = ""
    comments: tuple[tuple[str, str], ...] = ()  # on #1204: (author, body)
    others: tuple[tuple[int, str], ...] = ()  # other PRs' bodies


def case(
    id: str,
    pattern: int,
    body: str,
    *edges: tuple[int, int],
    superseded: tuple[tuple[int, int], ...] = (),
    title: str = "",
    comments: tuple[tuple[str, str], ...] = (),
    others: tuple[tuple[int, str], ...] = (),
) -> Case:
    return Case(id, pattern, body, frozenset(edges), frozenset(superseded), title, comments, others)


def records(item: Case) -> list[PrRecord]:
    bodies = dict(item.others)
    found = [
        PrRecord(
            number=PrNumber(number),
            author="bob",
            head_ref=f"bob/topic-{number}",
            body=bodies.get(number, ""),
        )
        for number in NUMBERS
        if number != OWN
    ]
    found.append(
        PrRecord(
            number=PrNumber(OWN),
            title=item.title or "Eval hook for the rope-scaled cache",
            author="alice",
            head_ref="alice/eval-hook",
            body=item.body,
            comments=tuple(CommentRecord(author=a, body=b) for a, b in item.comments),
        )
    )
    return found


ME = OWN
POSITIVES: tuple[Case, ...] = (
    # 1. A list under a lead-in line.
    case(
        "task list under depends on",
        1,
        "Adds the eval hook.\n\nDepends on:\n- [x] #1201\n- [ ] " + URL + "1202\n",
        (ME, 1201),
        (ME, 1202),
    ),
    case(
        "dependencies heading",
        1,
        "## Summary\nEval hook for the new cache.\n\n## Dependencies\n\n- #1203\n- #1199\n\n"
        "## Test plan\n`pytest tests/eval`\n",
        (ME, 1203),
        (ME, 1199),
    ),
    case(
        "merged first lead-in",
        1,
        "These PRs should be merged first:\n* " + URL + "1201\n* " + URL + "1203\n",
        (ME, 1201),
        (ME, 1203),
    ),
    case(
        "on hold until",
        1,
        "**This PR is on hold until the following are merged:**\n1. [ ] #1202\n2. [x] #1190\n",
        (ME, 1202),
        (ME, 1190),
    ),
    # 2. Variants of known phrases.
    case("followup PR for url", 2, "Followup PR for " + URL + "1190", (ME, 1190)),
    case(
        "follow-up of in title",
        2,
        "Same change for the eval loop.",
        (ME, 1199),
        title="Follow-up of #1199: tokenizer cache in eval",
    ),
    case("dependent on url", 2, "Dependent on " + URL + "1203 (rope scaling).", (ME, 1203)),
    case(
        "now dependent on",
        2,
        "Depends on #1201.",
        (ME, 1202),
        comments=(("alice", "Rebased: now dependent on #1202, which already contains #1201."),),
    ),
    case(
        "now also needs adds",
        2,
        "Depends on #1201 and now also needs #1202 for the config flag.",
        (ME, 1201),
        (ME, 1202),
    ),
    # 3. Supersession, either side: never a dependency.
    case("supersedes", 3, "Supersedes #1203 (rebased on main).", superseded=((1203, ME),)),
    case(
        "replaces",
        3,
        "Replaces #1199; the old branch was too far behind.",
        superseded=((1199, ME),),
    ),
    case(
        "in favor of on the old PR",
        3,
        "Eval hook.",
        superseded=((1203, ME),),
        others=((1203, "Closing in favor of #1204."),),
    ),
    case(
        "replaced by url on the old PR",
        3,
        "Eval hook.",
        superseded=((1202, ME),),
        others=((1202, "Replaced by " + URL + "1204"),),
    ),
    case(
        "new PR pointer",
        3,
        "Eval hook.",
        superseded=((1201, ME),),
        others=((1201, "New PR: " + URL + "1204 (I lost push access to the old branch)"),),
    ),
    # 4. Who the sentence is about.
    case(
        "since A depends on B",
        4,
        "Stacked on #1203; since #1205 depends on #1202, I kept the old helper name.",
        (ME, 1203),
        (1205, 1202),
    ),
    case(
        "which is stacked on",
        4,
        "Depends on #1203, which is stacked on #1202.",
        (ME, 1203),
        (1203, 1202),
    ),
    # 5. Declarations written on the parent.
    case("blocked on it", 5, "Please merge this one first, #1205 is blocked on it.", (1205, ME)),
    case("depends on this PR", 5, "Heads-up: #1205 depends on this PR.", (1205, ME)),
    # 6. Merge-order stories.
    case(
        "first then then this one",
        6,
        "Merge plan: first #1201 goes in, then #1202, then this one.",
        (ME, 1202),
        (1202, 1201),
    ),
    case(
        "first we land",
        6,
        "Order: first we land #1199, then #1203 and then this PR.",
        (ME, 1203),
        (1203, 1199),
    ),
    # 8. A stack list describes the whole stack.
    case(
        "hand list whole stack",
        8,
        "Stack:\n1. #1201\n2. #1203\n3. #1204 ← this PR\n4. #1205\n",
        (ME, 1203),
        (1203, 1201),
        (1205, ME),
    ),
    case(
        "stax whole stack",
        8,
        "<!-- stax:stack:start -->\n### Stack\n- #1205\n- **#1204** 👈 this PR\n- #1202\n"
        "- `main`\n<!-- stax:stack:end -->\n",
        (ME, 1202),
        (1205, ME),
    ),
    case(
        "whole stack unless own text",
        8,
        "Stack:\n1. #1201\n2. #1203\n3. #1204 ← this PR\n",
        (ME, 1203),
        (1203, 1199),
        others=((1203, "Based on #1199."),),
    ),
)

NEGATIVES: tuple[Case, ...] = (
    case("supersedes is no edge", 0, "Supersedes #1203.", superseded=((1203, ME),)),
    case(
        "replaces possessive",
        0,
        "Replaces #1203's cache eviction with an LRU; no dependency.",
    ),
    case("favor of approach", 0, "I'm in favor of #1202's approach, but this is separate."),
    case("fixes in a list", 0, "## Changes\n- Fixes #1190\n- Reverts #1199\n"),
    case("related heading", 0, "## Related\n- #1201\n- #1202\n"),
    case(
        "re-land list",
        0,
        "Re-land of the reverted changes, cherry-picked:\n- [x] #1201\n- [x] #1202\n",
    ),
    case("first mention no merge", 0, "First #1203 broke eval, then #1199 fixed the tokenizer."),
    case("not dependent", 0, "Not dependent on #1203 any more."),
    case(
        "extracted from",
        0,
        "Extracted from #1205 so it can be reviewed alone; see #1201 for context.",
    ),
    case("ghstack others stay own", 0, "Stack from ghstack:\n* #1205\n* __->__ #1204\n"),
)

# Written after the code above passed, and measured before any change for them (the figures are
# in the commit that adds them): how the rules carry over to wording they were not shaped on.
HELD_OUT_POSITIVES: tuple[Case, ...] = (
    case(
        "held checkbox blocked on",
        1,
        "Blocked on:\n- [ ] #1203\n- [ ] #1199",
        (ME, 1203),
        (ME, 1199),
    ),
    case(
        "held prerequisites heading",
        1,
        "### Prerequisites\n* " + URL + "1201\n* " + URL + "1202\n\n### Changes\n- eval hook\n",
        (ME, 1201),
        (ME, 1202),
    ),
    case("held follow up for", 2, "Follow up for #1190 (the review asked for it).", (ME, 1190)),
    case(
        "held favour closing",
        3,
        "Eval hook.",
        superseded=((1205, ME),),
        others=((1205, "Closing this in favour of " + URL + "1204, which is rebased."),),
    ),
    case(
        "held supersedes two",
        3,
        "This PR supersedes #1203 and #1202.",
        superseded=((1203, ME), (1202, ME)),
    ),
    case("held builds on this one", 5, "FYI #1205 builds on top of this one.", (1205, ME)),
    case(
        "held merge order this first",
        6,
        "Merge order: first this PR, then #1205.",
        (1205, ME),
    ),
    case(
        "held subject PR word",
        4,
        "Based on #1203. Note that PR #1205 also depends on #1201.",
        (ME, 1203),
        (1205, 1201),
    ),
)

HELD_OUT_NEGATIVES: tuple[Case, ...] = (
    case("held first fixes", 0, "First, this fixes #1190; then #1199 can be closed."),
    case("held replaces text", 0, "Replaces the loop in #1203's trainer with a generator."),
    case("held checkbox todo", 0, "## TODO\n- [ ] #1201 needs a test\n- [x] docs\n"),
)
