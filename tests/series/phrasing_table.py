"""Dependencies as people write them: a table of PR texts and the edges a reader takes from them.

Written by the team from the kinds of wording seen on stacked PRs (phrases, tool-written stack
lists, hand-written lists, branch names) and the ways a mention is *not* a dependency
(negations, quotes, code, HTML comments, other people's comments). Not copied from any project.

Every case is about PR #1204 by ``alice``; the other PRs exist and are open:
#1190, #1199, #1201, #1202, #1203 and #1205. #1203's head branch is ``feature/rope-scaling``,
#1202's ``kv-cache-refactor``, #1201's ``alice/stack/1``. ``tests/series/test_phrasings.py``
runs the table; ``benchmarks/dependency_phrasings.py`` measures recall and precision on it
(also against older code).
"""

from __future__ import annotations

from dataclasses import dataclass

from stackbot.domain.records import CommentRecord, PrRecord
from stackbot.domain.types import PrNumber

REPO = "acme/trainer"
OWN = 1204
AUTHOR = "alice"
HEADS = {
    1190: "bob/logging",
    1199: "carol/tokenizer",
    1201: "alice/stack/1",
    1202: "kv-cache-refactor",
    1203: "feature/rope-scaling",
    1205: "alice/stack/5",
}


@dataclass(frozen=True)
class Case:
    id: str
    body: str
    expected: frozenset[int]  # the PRs #1204 depends on, as a person reads the text
    comments: tuple[tuple[str, str], ...] = ()  # (author, body)


def case(id: str, body: str, *expected: int, comments: tuple[tuple[str, str], ...] = ()) -> Case:
    return Case(id, body, frozenset(expected), comments)


POSITIVES: tuple[Case, ...] = (
    case("depends on", "Depends on #1203.", 1203),
    case("stacked on", "Stacked on #1203 — review that one first.", 1203),
    case("stacked on top of", "This is stacked on top of #1203.", 1203),
    case("based on", "Based on #1202; the diff includes its commits until it merges.", 1202),
    case("based on top of", "based on top of #1202", 1202),
    case("builds on", "Builds on #1202 by moving the cache into the attention module.", 1202),
    case("builds on top of", "This builds on top of #1203 and #1202.", 1203, 1202),
    case("built on", "Built on #1203.", 1203),
    case("requires merged first", "Requires #1201 to be merged first.", 1201),
    case("requires colon", "**Requires:** #1201", 1201),
    case("blocked by", "Blocked by #1199 (tokenizer fix).", 1199),
    case("blocked on lower", "blocked on #1199", 1199),
    case("follow-up to", "Follow-up to #1190: same change for the eval loop.", 1190),
    case("followup of", "Followup of #1190", 1190),
    case("after merged", "Please merge after #1203 is merged.", 1203),
    case("after lands", "Can go in after #1202 lands.", 1202),
    case("needs", "Needs #1201 (adds the config flag).", 1201),
    case("owner/name form", "Depends on acme/trainer#1203", 1203),
    case("url form", "Stacked on https://github.com/acme/trainer/pull/1203", 1203),
    case("url with files", "Based on https://github.com/acme/trainer/pull/1202/files", 1202),
    case("PR N", "Depends on PR 1201", 1201),
    case(
        "markdown link", "Stacked on [the RoPE PR](https://github.com/acme/trainer/pull/1203)", 1203
    ),
    case(
        "several in a sentence",
        "Stacked on #1203 and also needs #1199 for the tokenizer.",
        1203,
        1199,
    ),
    case("list after phrase", "Depends on:\n- #1201\n- #1202\n", 1201, 1202),
    case("bold phrase", "**Stacked on** #1203", 1203),
    case("bold number", "Depends on **#1203**", 1203),
    case("task list item", "## Checklist\n- [ ] Blocked by #1199\n- [x] Tests", 1199),
    case("upper case", "DEPENDS ON #1203", 1203),
    case("colon no space", "Depends-On:#1202", 1202),
    case(
        "branch in backticks",
        "Stacked on `feature/rope-scaling`, which adds the scaling factor.",
        1203,
    ),
    case("branch word", "Based on branch kv-cache-refactor.", 1202),
    case("bare branch with slash", "Stacked on feature/rope-scaling", 1203),
    case(
        "author comment",
        "Adds the eval hook.",
        1202,
        comments=(("carol", "LGTM once CI passes"), ("alice", "Note: this is stacked on #1202.")),
    ),
    case(
        "ghstack",
        "Stack from [ghstack](https://github.com/ezyang/ghstack) (oldest at bottom):\n"
        "* #1205\n* __->__ #1204\n* #1203\n\nAdds rotary scaling to the eval path.\n",
        1203,
    ),
    case(
        "spr",
        "Wire the new scaling through the trainer.\n\n**Stack**:\n- #1205\n- #1204 ⬅\n- #1202\n"
        "\n\n⚠️ *Part of a stack created by [spr](https://github.com/ejoffe/spr). Do not merge "
        "manually using the UI - doing so may have unexpected results.*\n",
        1202,
    ),
    case(
        "graphite comment",
        "Adds the eval hook.",
        1203,
        comments=(
            (
                "graphite-app[bot]",
                '* **#1205** <a href="https://app.graphite.dev/github/pr/acme/trainer/1205'
                '?utm_source=stack-comment-icon" target="_blank"><img src="https://static.'
                'graphite.dev/graphite-32x32-black.png" alt="Graphite" width="10px" '
                'height="10px"/></a>\n'
                '* **#1204** <a href="https://app.graphite.dev/github/pr/acme/trainer/1204">'
                '</a> 👈 <a href="https://app.graphite.dev/github/pr/acme/trainer/1204?utm_source'
                '=stack-comment-view-in-graphite" target="_blank">(View in Graphite)</a>\n'
                '* **#1203** <a href="https://app.graphite.dev/github/pr/acme/trainer/1203"></a>\n'
                "* `main`\n\n"
                'This stack of pull requests is managed by <a href="https://graphite.dev?utm-'
                'source=stack-comment"><b>Graphite</b></a>. Learn more about <a href="https://'
                'stacking.dev/?utm_source=stack-comment">stacking</a>.\n',
            ),
        ),
    ),
    case(
        "graphite in body",
        "Faster cache eviction.\n\n---\n* #1205\n* #1204 👈\n* #1202\n* `main`\n",
        1202,
    ),
    case(
        "graphite nested legacy",
        "**Current dependencies on/for this PR:**\n* **main**\n  * **PR #1201**\n"
        "    * **PR #1204** 👈\n      * **PR #1205**\n",
        1201,
    ),
    case(
        "sapling",
        "Stack created with [Sapling](https://sapling-scm.com). Best reviewed with "
        "[ReviewStack](https://reviewstack.dev/acme/trainer/pull/1204).\n"
        "* #1205\n* __->__ #1204\n* #1201\n",
        1201,
    ),
    case(
        "stax",
        "Moves the scheduler config.\n\n<!-- stax:stack:start -->\n### Stack\n"
        "- #1205\n- **#1204** 👈 this PR\n- #1203\n- `main`\n<!-- stax:stack:end -->\n",
        1203,
    ),
    case(
        "hand list numbered",
        "This is part 3 of the cache series:\n1. #1201\n2. #1202\n3. #1204 (this PR)\n4. #1205\n",
        1202,
    ),
    case(
        "hand list arrow",
        "PR stack:\n- #1199 (merged)\n- #1203\n- #1204 ← you are here\n- #1205\n",
        1203,
    ),
    case(
        "hand list base at bottom",
        "Stack (newest first):\n- #1205\n- #1204 <- this one\n- #1202\n",
        1202,
    ),
)

NEGATIVES: tuple[Case, ...] = (
    case("depends-on-not", "Depends-On-NOT: #1203"),
    case("no longer", "This no longer depends on #1203; it was rebased onto main."),
    case("not stacked", "Not stacked on #1203 anymore."),
    case("instead of", "Instead of being stacked on #1203, this targets main directly."),
    case("rather than", "Rebased onto main rather than building on #1202."),
    case("previously", "Previously based on #1202, now independent."),
    case("email quote", "On Tue, Mar 4 Bob wrote:\n> Depends on #1203\n\nI dropped that."),
    case("quote", "> Stacked on #1203\n\nThe old description said the above."),
    case("inline code", "Write `Depends on #1203` to declare a dependency."),
    case("code block", "Template:\n```\nStacked on #1203\nBlocked by #1199\n```\n"),
    case("indented code", "Example:\n\n    Depends on #1202\n\nThat is the syntax."),
    case("html comment", "<!-- Depends on #1201 (leave this line if your PR is stacked) -->"),
    case("double quotes", 'Reviewers asked for "Depends on #1203" wording elsewhere.'),
    case(
        "other people's comment",
        "Adds the eval hook.",
        comments=(("carol", "Depends on #1203, I think?"), ("dave", "Blocked by #1199")),
    ),
    case(
        "review discussion link",
        "Adds the eval hook.",
        comments=(("bob", "See the discussion in https://github.com/acme/trainer/pull/1202"),),
    ),
    case("mention", "Similar to #1203 and related to #1202."),
    case("fixes", "Fixes #1190. Closes #1199."),
    case("requires prose", "This requires a rebase after the config change."),
    case("after without merge", "After #1203, the cache is shared; this PR adds eviction."),
    case("part of", "Part of #1190."),
    case("superseded", "Superseded by #1205"),
    case("list without marker", "Related PRs:\n- #1201\n- #1202\n- #1205\n"),
    case("stack list other pr", "Stack:\n- #1201\n- #1202 👈\n- #1203\n"),
    case("branch of no PR", "Based on `main`."),
)


def records(item: Case) -> list[PrRecord]:
    """The PRs of one case: #1204 with the case's text, and the others it may name."""
    others = [
        PrRecord(number=PrNumber(number), author="bob", head_ref=head, body="")
        for number, head in HEADS.items()
    ]
    own = PrRecord(
        number=PrNumber(OWN),
        author=AUTHOR,
        head_ref="alice/stack/4",
        body=item.body,
        comments=tuple(CommentRecord(author=a, body=b) for a, b in item.comments),
    )
    return [*others, own]


# Written after the code, and measured before any change to it (the first figures the benchmark
# printed for these are in the closing note); kept apart from the table above.
FRESH_POSITIVES: tuple[Case, ...] = (
    case(
        "fresh depends on url md",
        "Depends on [#1203](https://github.com/acme/trainer/pull/1203)",
        1203,
    ),
    case("fresh stacked colon", "Stacked on: #1202", 1202),
    case(
        "fresh this PR is based", "This PR is based on #1201 and should be reviewed after it.", 1201
    ),
    case("fresh needs merged first", "Needs #1199 merged first.", 1199),
    case("fresh blocked by bold", "⚠️ **Blocked by** #1190", 1190),
    case("fresh requires two", "Requires #1201 and #1202.", 1201, 1202),
    case("fresh on top of", "Sits on top of #1203 (rope scaling).", 1203),
    case("fresh depends lower list", "depends on\n* #1201\n* #1203", 1201, 1203),
    case("fresh follow up", "This is a follow-up to #1190, addressing the review comments.", 1190),
    case("fresh land after", "Land after #1205.", 1205),
    case(
        "fresh ghstack top",
        "Stack from [ghstack](https://github.com/ezyang/ghstack) (oldest at bottom):\n"
        "* __->__ #1204\n* #1202\n* #1201\n",
        1202,
    ),
    case(
        "fresh hand stack",
        "## Stack\n- [x] #1201 config flag (merged)\n- [ ] #1203 rope scaling\n- [ ] #1204 eval hook 👈\n",
        1203,
    ),
    case("fresh branch code based", "Based on the `kv-cache-refactor` branch.", 1202),
    case(
        "fresh author comment list",
        "Eval hook.",
        1201,
        comments=(("alice", "Stack:\n1. #1201\n2. #1204 ← this PR"),),
    ),
)

FRESH_NEGATIVES: tuple[Case, ...] = (
    case("fresh not depend", "This doesn't depend on #1203 anymore."),
    case("fresh quoted review", "> Is this blocked by #1199?\n\nNo, it is independent."),
    case("fresh code diff", "```diff\n- Depends on #1201\n+ Independent\n```"),
    case("fresh reviewer", "Eval hook.", comments=(("bob", "Stacked on #1203 would be cleaner."),)),
    case("fresh comparison", "Needs more tests, like #1203 has."),
    case("fresh after mention", "After #1202 we saw a regression; this fixes it."),
)
