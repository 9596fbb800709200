"""The conflict matrix of a series on real repositories."""

from __future__ import annotations

import json

from stackbot.domain.integration import Conflict
from stackbot.domain.types import PrNumber, Sha
from stackbot.services.conflicts import ConflictCache, ConflictMatrix, conflict_matrix
from tests.integration.conftest import MirrorOf
from tests.integration.megatron import ALLOWLIST
from tests.integration.repo_builder import RepoBuilder


def test_pairs_conflict_ignoring_generated_files(builder: RepoBuilder, mirror_of: MirrorOf) -> None:
    builder.commit("base", {"a.txt": "1\n2\n3\n", "b.txt": "b\n", ALLOWLIST: '{"total": 0}\n'})
    builder.pr_branch("p1", {"a.txt": "1\nONE\n3\n", ALLOWLIST: '{"total": 1}\n'})
    builder.pr_branch("p2", {"a.txt": "1\nTWO\n3\n"})
    builder.pr_branch("p3", {"b.txt": "three\n", ALLOWLIST: '{"total": 3}\n'})
    builder.pr_branch("p4", {"new.txt": "4\n"})
    builder.commit("main edits b", {"b.txt": "main\n"})
    mirror = mirror_of(builder)
    base = mirror.rev_parse("main")
    prs = [(PrNumber(n), mirror.rev_parse(f"p{n}")) for n in (1, 2, 3, 4)]
    cache = ConflictCache()
    seen: list[tuple[int, int]] = []
    matrix = conflict_matrix(
        mirror,
        base,
        prs,
        generated=[ALLOWLIST],
        cache=cache,
        progress=lambda d, t: seen.append((d, t)),
    )
    # p1 and p3 meet only in the allowlist, which is regenerated: no conflict.
    assert [(p.a, p.b) for p in matrix.pairs] == [(1, 2)]
    assert matrix.conflict(PrNumber(2), PrNumber(1)) == (Conflict("a.txt", "contents"),)
    assert matrix.conflict(PrNumber(1), PrNumber(3)) == ()
    # p3 does not even merge onto the base (main changed b.txt too).
    assert matrix.with_base == {PrNumber(3): (Conflict("b.txt", "contents"),)}
    assert seen[-1] == (6, 6)
    assert cache.misses == 4 + 6

    # Cached by head SHAs: the same heads cost no merge, a new head only its row.
    again = conflict_matrix(mirror, base, prs, generated=[ALLOWLIST], cache=cache)
    assert again.pairs == matrix.pairs and cache.misses == 10
    builder.checkout("p4")
    builder.commit("p4 touches a", {"a.txt": "1\nFOUR\n3\n"})
    mirror.fetch()
    moved = [*prs[:3], (PrNumber(4), mirror.rev_parse("p4"))]
    restored = ConflictCache.from_json(json.loads(json.dumps(cache.to_json())))
    third = conflict_matrix(mirror, base, moved, generated=[ALLOWLIST], cache=restored)
    assert restored.misses == 1 + 3
    assert {(p.a, p.b) for p in third.pairs} == {(1, 2), (1, 4), (2, 4)}
    document = third.to_json()
    assert document["pairs"][0] == {
        "a": 1,
        "b": 2,
        "conflicts": [{"path": "a.txt", "type": "contents"}],
    }
    assert document["heads"]["4"] == Sha(mirror.rev_parse("p4"))


def _series_of_eight(builder: RepoBuilder) -> None:
    """Eight PRs on one base: some edit the same lines (pairs conflict), one conflicts with a
    later change on main (it does not merge onto the base), the rest are independent."""
    lines = [f"line {n}" for n in range(20)]
    builder.commit("base", {"a.txt": "\n".join(lines) + "\n", "b.txt": "b\n", ALLOWLIST: "{}\n"})
    for n in range(1, 9):
        edited = list(lines)
        edited[n % 3] = f"PR {n} was here"  # PRs 1, 4, 7 / 2, 5, 8 / 3, 6 share a line
        files = {"a.txt": "\n".join(edited) + "\n", f"own{n}.txt": f"{n}\n"}
        if n == 6:
            files["b.txt"] = "six\n"
        builder.pr_branch(f"p{n}", files)
    builder.commit("main edits b", {"b.txt": "main\n"})


def test_a_push_recomputes_only_that_prs_row_and_equals_the_full_recompute(
    builder: RepoBuilder, mirror_of: MirrorOf
) -> None:
    _series_of_eight(builder)
    mirror = mirror_of(builder)
    base = mirror.rev_parse("main")
    prs = [(PrNumber(n), mirror.rev_parse(f"p{n}")) for n in range(1, 9)]
    first = conflict_matrix(mirror, base, prs, generated=[ALLOWLIST])
    assert (first.merged_onto_base, first.merged_pairs) == (8, 28)
    assert {(p.a, p.b) for p in first.pairs} >= {(1, 4), (2, 5), (3, 6)}
    assert set(first.with_base) == {6}

    builder.checkout("p3")
    builder.commit("p3 moves to line 1", {"a.txt": "line 0\nPR 3 now\n" + "x\n" * 18})
    mirror.fetch()
    pushed = [*prs[:2], (PrNumber(3), mirror.rev_parse("p3")), *prs[3:]]
    # What the worker stores and reads back: the JSON document, in a new process (no cache).
    stored = ConflictMatrix.from_json(json.loads(json.dumps(first.to_json())))
    assert stored is not None
    incremental = conflict_matrix(mirror, base, pushed, generated=[ALLOWLIST], previous=stored)
    full = conflict_matrix(mirror, base, pushed, generated=[ALLOWLIST])
    assert (incremental.merged_onto_base, incremental.merged_pairs) == (1, 7)
    assert incremental.pairs == full.pairs and incremental.with_base == full.with_base
    assert incremental.to_json() == full.to_json()
    assert (1, 3) in {(p.a, p.b) for p in full.pairs}  # now it meets PR 1's line

    # Another base or another list of generated files: nothing of the old matrix is reused.
    other = conflict_matrix(mirror, base, pushed, generated=[], previous=full)
    assert other.merged_pairs == 28
    assert ConflictMatrix.from_json({"base": "x"}) is None


def test_a_pr_moving_in_the_order_recomputes_no_pair(
    builder: RepoBuilder, mirror_of: MirrorOf
) -> None:
    _series_of_eight(builder)
    mirror = mirror_of(builder)
    base = mirror.rev_parse("main")
    prs = [(PrNumber(n), mirror.rev_parse(f"p{n}")) for n in range(1, 9)]
    cache = ConflictCache()
    first = conflict_matrix(mirror, base, prs, generated=[ALLOWLIST], cache=cache)
    moved = conflict_matrix(mirror, base, prs[::-1], generated=[ALLOWLIST], cache=cache)
    assert moved.merged_pairs == 0
    assert {frozenset((p.a, p.b)): p.conflicts for p in moved.pairs} == {
        frozenset((p.a, p.b)): p.conflicts for p in first.pairs
    }
