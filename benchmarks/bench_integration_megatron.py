"""Issue 16's integration figures on a real Megatron-LM clone (``bench_integration.py
--megatron PATH`` calls :func:`measure_megatron`; see that module's docstring)."""

from __future__ import annotations

import ast
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench_integration import git, run_bare_chain, say

from stackbot.adapters.git import GitRepository
from stackbot.domain.allowlist import Generation, MemoryScanCache, is_scanned_path
from stackbot.domain.integration import IntegrationRunResult, RunKind, StepOutcome
from stackbot.domain.types import PrNumber
from stackbot.services.integration import RunRequest, StepMemo, run_integration
from stackbot.services.tree_allowlist import TreeAllowlist


def scratch_repo(clone: Path, root: Path, name: str, refs: dict[str, str]) -> Path:
    """A bare repository borrowing ``clone``'s objects, with ``refs``; writes stay in it."""
    scratch = root / name
    git(root, "init", "--quiet", "--bare", str(scratch))
    objects = clone / "objects" if (clone / "objects").is_dir() else clone / ".git" / "objects"
    (scratch / "objects" / "info" / "alternates").write_text(f"{objects.resolve()}\n")
    lines = "".join(f"update {ref} {sha}\n" for ref, sha in refs.items())
    subprocess.run(["git", "update-ref", "--stdin"], cwd=scratch, input=lines, text=True,
                   check=True)  # fmt: skip
    return scratch


def integrate(
    repo_dir: Path, numbers: list[int], cache: MemoryScanCache, memo: StepMemo | None
) -> tuple[float, IntegrationRunResult]:
    repo = GitRepository(repo_dir)
    request = RunRequest(
        base_ref="main",
        prs=[(PrNumber(n), f"refs/pull/{n}/head") for n in numbers],
        kind=RunKind.SERIES,
        name="bench",
    )
    start = time.perf_counter()
    result = run_integration(repo, request, allowlist=TreeAllowlist(repo, cache=cache), memo=memo)
    seconds = time.perf_counter() - start
    repo.close()
    return seconds, result


def checker_scan(repo_dir: Path, commit: str) -> tuple[float, int]:
    """The checker's own method over the base: parse every scanned file and walk its tree."""
    repo = GitRepository(repo_dir)
    start = time.perf_counter()
    paths = {p: sha for p, sha in repo.ls_tree(repo.tree_of(repo.rev_parse(commit))).items()
             if is_scanned_path(p)}  # fmt: skip
    blobs = repo.read_blobs(list(paths.values()))
    for path, sha in paths.items():
        try:
            for _ in ast.walk(ast.parse(blobs[sha], filename=path)):
                pass
        except SyntaxError:
            pass
    seconds = time.perf_counter() - start
    repo.close()
    return seconds, len(paths)


def measure_megatron(clone: Path, count: int, push: int, repeat: int) -> int:
    refs = git(clone, "for-each-ref", "--format=%(refname) %(objectname)", "refs/pull/*/head")
    heads = sorted(
        (int(ref.split("/")[2]), sha)
        for ref, sha in (line.split() for line in refs.stdout.splitlines())
    )[-count:]
    base = git(clone, "rev-parse", "main").stdout.strip()
    numbers = [n for n, _ in heads]
    wanted = {"refs/heads/main": base, **{f"refs/pull/{n}/head": sha for n, sha in heads}}
    root = Path(tempfile.mkdtemp(prefix="stackbot-bench-megatron-"))
    try:
        say(f"{len(numbers)} PRs #{numbers[0]}..#{numbers[-1]} onto main {base[:7]}; cold ...")
        cold_s, result = integrate(
            scratch_repo(clone, root, "cold.git", wanted), numbers, MemoryScanCache(), None
        )
        counts = {o.value: sum(s.outcome is o for s in result.steps) for o in StepOutcome}
        merged = [s.head_sha for s in result.steps if s.commit is not None]
        work = scratch_repo(clone, root, "work.git", wanted)
        say(f"steps: {counts}; bare chain, checker scan, warm runs ...")
        scan_s, scanned = min(checker_scan(work, base) for _ in range(repeat))
        base_cache = MemoryScanCache()
        repo = GitRepository(work)
        TreeAllowlist(repo, cache=base_cache).scan(repo.tree_of(base), Generation.SCOPE)
        repo.close()
        # Interleaved, so drift in the machine's load touches all three alike.
        warms, bares, attempts = [], [], []
        for _ in range(repeat):
            warms.append(integrate(work, numbers, base_cache, None)[0])
            bares.append(run_bare_chain(work, base, merged))
            attempts.append(
                run_bare_chain(work, base, [sha for _, sha in heads], leave_out_conflicts=True)
            )
        warm, bare_all = statistics.median(warms), statistics.median(attempts)
        bare = statistics.median(bares)
        # A push to the PR at position ``push``: its head gets one more commit.
        memo = StepMemo()
        integrate(work, numbers, base_cache, memo)
        pushed_number, pushed_head = heads[push - 1]
        repo = GitRepository(work)
        tree = repo.replace_paths(repo.tree_of(pushed_head), {"bench_push.txt": b"pushed\n"})
        new_head = repo.commit_tree(tree, [pushed_head], "a push\n")
        repo.update_refs({f"refs/pull/{pushed_number}/head": new_head})
        repo.close()
        before = memo.misses
        push_s, after = integrate(work, numbers, base_cache, memo)
        redone = memo.misses - before
        merging = [s.position for s in after.steps if s.outcome is not StepOutcome.SKIPPED]
        expected = sum(1 for position in merging if position >= push)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"Megatron-LM clone {clone}: {len(numbers)} PRs #{numbers[0]}..#{numbers[-1]} onto "
          f"main {base[:7]}; steps {counts}")  # fmt: skip
    print(f"bare merge-tree + commit-tree chain ({len(merged)} merges): {bare:8.3f}s")
    print(f"bare chain attempting all {len(numbers)} merges (conflicts left out): "
          f"{bare_all:8.3f}s")  # fmt: skip
    print(f"checker's scan of the base ({scanned} files, ast.parse + walk): {scan_s:8.3f}s")
    print(f"stackbot warm (base scanned, no step memo):  {warm:8.3f}s  "
          f"{warm / bare:5.2f}x the bare chain of the clean merges (goal <= 1.1x); "
          f"{warm / bare_all:5.2f}x the bare chain attempting every merge")  # fmt: skip
    cold_goal = 2 * bare + scan_s
    print(f"stackbot cold (new repository and caches):   {cold_s:8.3f}s  "
          f"{cold_s / bare:5.2f}x the bare chain; {cold_s / cold_goal:5.2f}x the goal's "
          f"2 x bare + checker scan = {cold_goal:.3f}s (goal <= 1.0x)")  # fmt: skip
    print(f"push to #{pushed_number} (position {push}): {redone} steps merged again "
          f"(goal: at most the {expected} from position {push} on), {push_s:8.3f}s = "
          f"{push_s / warm:5.2f}x a warm full run; steps redone / all: "
          f"{redone / max(1, len(merging)):.2f}")  # fmt: skip
    goals = {
        "warm <= 1.1x the bare chain of the clean merges": warm / bare <= 1.1,
        "warm <= 1.1x the bare chain attempting every merge": warm / bare_all <= 1.1,
        "cold <= 2x the bare chain + one checker scan": cold_s <= cold_goal,
        # At most the steps from k on: fewer when step k conflicts before and after (the
        # commit chain after it is then unchanged and every later step is reused).
        "a push redoes only the steps from its position": 1 <= redone <= expected,
    }
    for goal, met in goals.items():
        print(f"{'met   ' if met else 'MISSED'} {goal}")
    return 0 if all(goals.values()) else 1
