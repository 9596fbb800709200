"""The conflict matrix of a 50-PR series: full, and after a push to one PR, against bare git.

Baselines, in the same run: ``git merge-tree --write-tree`` of every pair of heads (1,225 calls
for 50 PRs), and of the pushed PR's 49 pairs. stackbot's full matrix also merges each PR onto
the base (the side a pair is merged on); after a push it takes every pair of unchanged heads
from the matrix stored last time (read back from its JSON, with an empty in-process cache, as
a fresh worker would) and merges only the pushed PR onto the base and its 49 pairs.

On a real Megatron-LM clone (a bare git directory with ``refs/pull/N/head``), the 50 PRs are the
highest-numbered pull refs and the base is ``main`` (or ``--base``); the clone is only read:
the merge commits go to a scratch repository that borrows its objects. Without a clone a small
synthetic repository is built (for CI).

    python benchmarks/bench_conflicts.py [--megatron /work/.mirror/NVIDIA+Megatron-LM/repo]
        [--prs 50] [--push 25]

Goal (issue 16): the push recomputes only that PR's pairs (prs - 1 of them).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench_integration import git as run_git
from bench_integration import say

from stackbot.adapters.git import GitRepository
from stackbot.config import DEFAULT_ALLOWLIST_PATH as ALLOWLIST
from stackbot.domain.types import PrNumber, Sha
from stackbot.services.conflicts import ConflictCache, ConflictMatrix, conflict_matrix


def git(cwd: Path, *args: str, ok: tuple[int, ...] = (0,)) -> str:
    return run_git(cwd, *args, ok=ok).stdout


def scratch_over(source: Path, root: Path) -> Path:
    """A bare repository that reads ``source``'s objects and writes its own."""
    scratch = root / "scratch.git"
    git(root, "init", "--quiet", "--bare", str(scratch))
    objects = source / "objects" if (source / "objects").is_dir() else source / ".git" / "objects"
    (scratch / "objects" / "info" / "alternates").write_text(f"{objects.resolve()}\n")
    return scratch


def megatron_series(clone: Path, count: int, base_ref: str) -> tuple[str, list[tuple[int, str]]]:
    refs = git(clone, "for-each-ref", "--format=%(refname) %(objectname)", "refs/pull/*/head")
    heads = sorted(
        (int(ref.split("/")[2]), sha) for ref, sha in (line.split() for line in refs.splitlines())
    )
    return git(clone, "rev-parse", base_ref).strip(), heads[-count:]


def synthetic_series(root: Path, count: int) -> tuple[Path, str, list[tuple[int, str]]]:
    work = root / "synthetic"
    work.mkdir()
    git(work, "init", "--quiet", "--initial-branch=main")
    lines = [f"line {n}" for n in range(200)]
    for n in range(40):
        (work / f"mod{n}.py").write_text("\n".join(lines) + "\n")
    git(work, "add", "-A")
    git(work, "commit", "--quiet", "-m", "base")
    prs = []
    for i in range(count):
        git(work, "checkout", "--quiet", "-B", f"pr{i}", "main")
        for k in range(3):
            path = work / f"mod{(i * 7 + k) % 40}.py"
            text = path.read_text().splitlines()
            text[(i * 13 + k) % 200] = f"PR {i} edit {k}"
            path.write_text("\n".join(text) + "\n")
        git(work, "commit", "--quiet", "-am", f"PR {i}")
        prs.append((1000 + i, git(work, "rev-parse", "HEAD").strip()))
    git(work, "checkout", "--quiet", "main")
    return work / ".git", git(work, "rev-parse", "main").strip(), prs


def bare_pairs(repo: Path, heads: list[str], only: str | None = None) -> tuple[float, int]:
    start, calls = time.perf_counter(), 0
    for i, a in enumerate(heads):
        for b in heads[i + 1 :]:
            if only is None or only in (a, b):
                git(repo, "merge-tree", "--write-tree", a, b, ok=(0, 1))
                calls += 1
    return time.perf_counter() - start, calls


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--megatron", type=Path, help="a Megatron-LM clone (bare git directory)")
    parser.add_argument("--base", default="main", help="the base ref in the clone")
    parser.add_argument("--prs", type=int, default=50)
    parser.add_argument("--push", type=int, default=25, help="position (1-based) pushed to")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="stackbot-bench-conflicts-"))
    try:
        if args.megatron:
            base, series = megatron_series(args.megatron, args.prs, args.base)
            repo_dir = scratch_over(args.megatron, root)
            source = f"Megatron-LM clone {args.megatron}, PRs #{series[0][0]}..#{series[-1][0]}"
        else:
            source_dir, base, series = synthetic_series(root, args.prs)
            repo_dir = scratch_over(source_dir, root)
            source = "synthetic repository (pass --megatron for the real figures)"
        return measure(repo_dir, base, series, args.push, source)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def measure(
    repo_dir: Path, base: str, series: list[tuple[int, str]], push: int, source: str
) -> int:
    repo = GitRepository(repo_dir)
    prs = [(PrNumber(n), Sha(sha)) for n, sha in series]
    pairs = len(prs) * (len(prs) - 1) // 2
    say(f"{source}: {len(prs)} PRs, {pairs} pairs; bare merge-tree of every pair ...")
    bare_full, calls = bare_pairs(repo_dir, [sha for _, sha in prs])
    say("stackbot's full matrix ...")
    start = time.perf_counter()
    full = conflict_matrix(repo, Sha(base), prs, generated=[ALLOWLIST], cache=ConflictCache())
    full_s = time.perf_counter() - start

    # A push to the PR at ``push``: a new commit on its head (one more file).
    number, head = prs[push - 1]
    tree = repo.replace_paths(repo.tree_of(head), {"bench_push.txt": b"pushed\n"})
    pushed_head = repo.commit_tree(tree, [head], "a push\n")
    pushed = [*prs[: push - 1], (number, pushed_head), *prs[push:]]
    stored = ConflictMatrix.from_json(json.loads(json.dumps(full.to_json())))
    say(f"a push to #{number}: bare merge-tree of its pairs, then stackbot's matrix ...")
    bare_push, push_calls = bare_pairs(repo_dir, [sha for _, sha in pushed], only=pushed_head)
    start = time.perf_counter()
    after = conflict_matrix(
        repo, Sha(base), pushed, generated=[ALLOWLIST], cache=ConflictCache(), previous=stored
    )
    push_s = time.perf_counter() - start
    say("the same matrix recomputed in full, to check it ...")
    check = conflict_matrix(repo, Sha(base), pushed, generated=[ALLOWLIST])
    same = check.to_json() == after.to_json()
    if not same:
        a, b = check.to_json(), after.to_json()
        say(str({k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)})[:2000])

    print(f"source: {source}")
    print(f"conflicting pairs: {len(full.pairs)} of {pairs}; not merging onto the base: "
          f"{len(full.with_base)}")  # fmt: skip
    print(f"full matrix: {full_s:8.2f}s ({full.merged_onto_base} onto base + "
          f"{full.merged_pairs} pairs merged)")  # fmt: skip
    print(f"bare merge-tree, {calls} calls: {bare_full:8.2f}s  ratio {full_s / bare_full:5.2f}x")
    print(f"after a push to #{number}: {push_s:8.2f}s ({after.merged_onto_base} onto base + "
          f"{after.merged_pairs} pairs merged; goal {len(prs) - 1} pairs)")  # fmt: skip
    print(f"bare merge-tree of its {push_calls} pairs: {bare_push:8.2f}s  "
          f"ratio {push_s / bare_push:5.2f}x; full matrix / push {full_s / push_s:5.1f}x")  # fmt: skip
    print(f"incremental matrix equals the full recompute: {'yes' if same else 'NO'}")
    met = same and after.merged_pairs == len(prs) - 1 and after.merged_onto_base == 1
    print(f"{'met   ' if met else 'MISSED'} a push recomputes only that PR's {len(prs) - 1} pairs")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
