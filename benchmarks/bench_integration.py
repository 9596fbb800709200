"""Series integration: stackbot vs a worktree merge loop vs the bare ``git merge-tree`` chain.

Builds a real repository (a ``megatron/core``-like tree of modules that read ``parallel_state``,
tests and docs; at least 3,000 files; its allowlist) and PR branches with overlapping edits:
most add or drop reads and refresh the allowlist, a few are stacked on another PR, and a few
edit the same lines as an earlier PR (real conflicts). Then, on that one repository, it times:

1. stackbot's series integration (``run_integration``), cold (empty scan cache) and warm (the
   scan cache already holds the base tree, as after any earlier run on this base);
2. a worktree loop: ``git checkout`` the base, ``git merge`` each PR, regenerate the allowlist
   by a full scan of the working tree, commit (same skip policy);
3. the bare chain: ``git merge-tree --write-tree`` + ``git commit-tree`` for the same PRs,
   nothing else.

It checks that stackbot and the worktree loop end on the same tree, and measures incremental
allowlist regeneration (warm cache) against a full scan for a 40-file change.

    python benchmarks/bench_integration.py [--prs 40] [--files 3000] [--repeat 3] [--keep DIR]

Goals: stackbot >= 10x faster than the worktree loop, within 1.5x of the bare chain, and
incremental regeneration >= 10x faster than a full scan.

With ``--megatron PATH`` (a Megatron-LM clone: a bare git directory with ``refs/pull/N/head``)
it measures issue 16's goals on real material instead: the ``--prs`` highest-numbered pull refs
(default 50) integrated as one series onto ``main``, in a scratch repository that borrows the
clone's objects (the clone is only read). Against the bare chain of the same merges, timed in
the same run and interleaved with stackbot's runs: warm (the scan cache holds the base, a new
step memo) <= 1.1x, against two bare chains: the one that attempts every PR's merge in order
and leaves the conflicting ones out (what stackbot does; a conflicting merge can cost git ten
times a clean one), and the clean merges alone (a floor that knows the outcome in advance);
cold (new
scratch repository, empty caches) <= 2x the bare chain plus one scan of the base by the
checker's own method (a plain ``ast`` walk of every scanned file); and a push to the PR at
position k (``--push``, default 25) with the step memo of the earlier run: only steps k.. are
merged again (counted), in time proportional to them.

    python benchmarks/bench_integration.py --megatron /work/.mirror/NVIDIA+Megatron-LM/repo
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from stackbot.adapters.git import GitMirror, GitRepository
from stackbot.config import DEFAULT_ALLOWLIST_PATH as ALLOWLIST
from stackbot.domain.allowlist import (
    Allowlist,
    Generation,
    MemoryScanCache,
    TreeScan,
    is_scanned_path,
    parse_allowlist,
    regenerate,
    render_allowlist,
    scan_current,
)
from stackbot.domain.integration import IntegrationRunResult, RunKind, StepOutcome
from stackbot.domain.types import PrNumber
from stackbot.services.integration import RunRequest, run_integration
from stackbot.services.tree_allowlist import TreeAllowlist

ACCESSORS = [
    "get_tensor_model_parallel_group",
    "get_data_parallel_rank",
    "get_pipeline_model_parallel_world_size",
    "get_context_parallel_group",
    "get_expert_model_parallel_group",
    "get_data_parallel_group_gloo",
]
COMMENT = "Reads of global process-group state still allowed in megatron/core (benchmark)."
IDENTITY = {
    "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_AUTHOR_DATE": "@1700000000 +0000", "GIT_COMMITTER_DATE": "@1700000000 +0000",
    "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C",
}  # fmt: skip


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# The bare chains date their merge commits now, as stackbot does. With IDENTITY's fixed 2023
# date, each chain commit is older than the PR heads it merges, and git's date-ordered
# merge-base walk goes far down the history at every step: on 50 real Megatron-LM PRs that made
# the 33 clean merges take 1.50 s instead of 0.59 s, flattering stackbot by 2.5x.
NOW = {k: v for k, v in IDENTITY.items() if not k.endswith("_DATE")}


def git(
    cwd: Path, *args: str, ok: tuple[int, ...] = (0,), dated: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={
            **{k: v for k, v in os.environ.items() if not k.endswith("_DATE")},
            **(IDENTITY if dated else NOW),
        },
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode not in ok:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr}")
    return done


# -- the synthetic repository -----------------------------------------------------------------


@dataclass
class Function:
    owner: str | None  # the class of a method
    header: str
    body: list[str]


@dataclass
class Module:
    functions: list[Function]

    def render(self) -> str:
        lines = ['"""A generated module of the integration benchmark."""', "import math",
                 "from megatron.core import parallel_state", "from megatron.core import mpu", ""]  # fmt: skip
        owner = None
        for fn in self.functions:
            if fn.owner != owner and fn.owner is not None:
                lines += ["", f"class {fn.owner}:"]
            owner = fn.owner
            pad = "        " if fn.owner else "    "
            lines += ["" if fn.owner else "\n", ("    " if fn.owner else "") + fn.header]
            lines += [pad + line for line in fn.body]
        return "\n".join(lines) + "\n"


def make_module(rng: random.Random, n: int, functions: int) -> Module:
    """Six functions; one module in eight reads global state, in one or two of its functions
    (Megatron's allowlist lists about 200 reads over some 70 files)."""
    made = []
    readers = (
        set(rng.sample(range(functions), rng.choice([1, 1, 2]))) if rng.random() < 0.125 else set()
    )
    for k in range(functions):
        owner = f"Block{n}" if k < functions // 2 else None
        header = f"def method_{k}(self, x):" if owner else f"def helper_{n}_{k}(values):"
        body = [f"s{k}_0 = {k}", f"s{k}_1 = math.sqrt({k} + 1)"]
        for r in range(rng.choice([1, 1, 2]) if k in readers else 0):
            root = rng.choice(["parallel_state", "parallel_state", "mpu"])
            body.insert(1, f"g{k}_{r} = {root}.{rng.choice(ACCESSORS)}()")
        body.append(f"return s{k}_0")
        made.append(Function(owner, header, body))
    return Module(made)


@dataclass
class Pr:
    number: int
    start: str  # branch or sha it starts from
    edits: dict[str, Module] = field(default_factory=dict)
    parent: int | None = None


class BenchRepo:
    def __init__(self, root: Path, files: int, prs: int, seed: int) -> None:
        self.path = root / "work"
        self.rng = random.Random(seed)
        core = max(files * 2 // 5, 100)  # megatron/core is about a third of Megatron-LM
        self.modules = {
            f"megatron/core/pkg{n % 50:02}/mod_{n:04}.py": make_module(self.rng, n, 6)
            for n in range(core)
        }
        self.others = {
            f"tests/unit_tests/test_{n:04}.py": f"def test_{n}():\n    assert {n} == {n}\n"
            for n in range(files - core)
        }
        self.reads = {p: scan_current(p, m.render()).entries for p, m in self.modules.items()}
        self.prs: list[Pr] = []
        self.plan_prs(prs)

    def allowlist_for(self, edits: dict[str, Module]) -> str:
        reads = dict(self.reads)
        reads.update({p: scan_current(p, m.render()).entries for p, m in edits.items()})
        return render_allowlist(
            Allowlist.from_reads(COMMENT, {p: list(e) for p, e in reads.items() if e})
        ).decode()

    def plan_prs(self, count: int) -> None:
        """Distinct (file, function) slots per PR, from a hot pool so PRs overlap in files."""
        hot = self.rng.sample(sorted(self.modules), max(count * 2, 10))
        slots = [(path, k) for path in hot for k in range(6)]
        self.rng.shuffle(slots)
        for i in range(count):
            parent = self.prs[i - 1] if i % 8 == 7 else None
            pr = Pr(
                1000 + i,
                f"pr/{1000 + i - 1}" if parent else "main",
                copy.deepcopy(parent.edits) if parent else {},
                parent.number if parent else None,
            )
            for _ in range(7):
                path, k = slots.pop()
                module = pr.edits.setdefault(path, copy.deepcopy(self.modules[path]))
                self.edit(module.functions[k], i)
            self.prs.append(pr)
        # A few PRs change a line an earlier PR changed: real conflicts (one has a stacked child).
        for a, b in ((2, 14), (5, 22), (9, 30)):
            if b < count:
                self.conflict(self.prs[a], self.prs[b])

    def conflict(self, first: Pr, second: Pr) -> None:
        for path in sorted(first.edits):
            base = self.modules[path]
            for k, (fn, original) in enumerate(
                zip(first.edits[path].functions, base.functions, strict=True)
            ):
                if fn.body[0] != original.body[0]:
                    module = second.edits.setdefault(path, copy.deepcopy(base))
                    module.functions[k].body[0] = original.body[0] + f" - {second.number}"
                    return

    def edit(self, fn: Function, i: int) -> None:
        kind = self.rng.random()
        reads = [n for n, line in enumerate(fn.body) if "_state." in line or "mpu." in line]
        if kind < 0.55:
            fn.body.insert(1, f"n{i} = parallel_state.{self.rng.choice(ACCESSORS)}()")
        elif kind < 0.75 and reads:
            del fn.body[reads[0]]
        else:
            fn.body[0] = fn.body[0] + f" + {i}"

    def build(self) -> None:
        self.path.mkdir(parents=True)
        git(self.path, "init", "--quiet", "--initial-branch=main")
        for path, content in [
            *((p, m.render()) for p, m in self.modules.items()),
            *self.others.items(),
        ]:
            target = self.path / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        (self.path / ALLOWLIST).parent.mkdir(parents=True, exist_ok=True)
        (self.path / ALLOWLIST).write_text(self.allowlist_for({}))
        git(self.path, "add", "-A")
        git(self.path, "commit", "--quiet", "-m", "base")
        for pr in self.prs:
            git(self.path, "checkout", "--quiet", "-B", f"pr/{pr.number}", pr.start)
            for path, module in pr.edits.items():
                (self.path / path).write_text(module.render())
            (self.path / ALLOWLIST).write_text(self.allowlist_for(pr.edits))
            git(self.path, "commit", "--quiet", "-am", f"PR {pr.number}")
        git(self.path, "checkout", "--quiet", "main")


# -- the three ways to integrate --------------------------------------------------------------


def run_stackbot(
    bench: BenchRepo, mirrors: Path, cache: MemoryScanCache
) -> tuple[float, IntegrationRunResult]:
    request = RunRequest(
        base_ref="main",
        prs=[(PrNumber(pr.number), f"pr/{pr.number}") for pr in bench.prs],
        kind=RunKind.SERIES,
        name="bench",
        depends_on={PrNumber(pr.number): [PrNumber(pr.parent)] for pr in bench.prs if pr.parent},
    )
    with GitMirror.open_or_clone(str(bench.path), mirrors) as mirror:
        start = time.perf_counter()
        result = run_integration(mirror, request, allowlist=TreeAllowlist(mirror, cache=cache))
        return time.perf_counter() - start, result


def run_bare_chain(
    git_dir: Path, base: str, heads: Sequence[str], *, leave_out_conflicts: bool = False
) -> float:
    """``git merge-tree --write-tree`` + ``git commit-tree`` for each head in order. With
    ``leave_out_conflicts`` a head whose merge conflicts is not committed (what stackbot does
    when it does not know the outcome in advance); else its conflicted tree is committed."""
    start = time.perf_counter()
    current = base
    for head in heads:
        done = git(git_dir, "merge-tree", "--write-tree", current, head, ok=(0, 1), dated=False)
        if done.returncode == 1 and leave_out_conflicts:
            continue
        tree = done.stdout.split("\n", 1)[0]
        current = git(
            git_dir,
            "commit-tree",
            tree,
            "-p",
            current,
            "-p",
            head,
            "-m",
            f"merge {head}",
            dated=False,
        ).stdout.strip()
    return time.perf_counter() - start


def full_scan(root: Path) -> TreeScan:
    outcomes = {}
    for path in sorted(
        p.relative_to(root).as_posix() for p in (root / "megatron/core").rglob("*.py")
    ):
        if is_scanned_path(path):
            outcomes[path] = scan_current(path, (root / path).read_bytes())
    return TreeScan(Generation.SCOPE, outcomes, parsed=len(outcomes), cache_hits=0)


def run_worktree_loop(
    bench: BenchRepo, root: Path, progress: Callable[[str], None]
) -> tuple[float, str]:
    """What a script does today: a real checkout, ``git merge`` per PR, and a full scan to
    regenerate the allowlist after every merge."""
    loop = root / "loop"
    git(root, "clone", "--quiet", "--no-checkout", str(bench.path), str(loop))
    start = time.perf_counter()
    git(loop, "checkout", "--quiet", "--detach", "origin/main")
    blocked: set[int] = set()
    for n, pr in enumerate(bench.prs, 1):
        if pr.parent in blocked:
            blocked.add(pr.number)
            continue
        ours = parse_allowlist((loop / ALLOWLIST).read_bytes())
        merged = git(
            loop, "merge", "--quiet", "--no-ff", "--no-edit", f"origin/pr/{pr.number}", ok=(0, 1)
        )
        if merged.returncode:
            unmerged = set(git(loop, "diff", "--name-only", "--diff-filter=U").stdout.split())
            if unmerged - {ALLOWLIST}:
                git(loop, "merge", "--abort")
                blocked.add(pr.number)
                continue
        theirs = parse_allowlist(
            git(loop, "show", f"origin/pr/{pr.number}:{ALLOWLIST}").stdout.encode()
        )
        regenerated = regenerate(
            ours=ours,
            theirs=theirs,
            tree=full_scan(loop),
            generation=Generation.SCOPE,
            comment=COMMENT,
        )
        (loop / ALLOWLIST).write_bytes(regenerated.data)
        git(loop, "add", ALLOWLIST)
        git(
            loop,
            "commit",
            "--quiet",
            "--no-edit",
            *([] if merged.returncode else ["--amend"]),
            ok=(0, 1),
        )
        progress(f"  worktree loop: {n}/{len(bench.prs)}")
    seconds = time.perf_counter() - start
    return seconds, git(loop, "rev-parse", "HEAD^{tree}").stdout.strip()


def incremental_vs_full(
    bench: BenchRepo, mirrors: Path, changed: int, repeat: int
) -> tuple[float, float, int]:
    """Regenerate the allowlist of a tree that changed ``changed`` scanned files, with the
    base tree already in the scan cache, against the same with an empty cache."""
    with GitMirror.open_or_clone(str(bench.path), mirrors) as repo:
        base = repo.tree_of(repo.rev_parse("main"))
        rng = random.Random(8035)
        files = {}
        for path in rng.sample(sorted(bench.modules), changed):
            module = copy.deepcopy(bench.modules[path])
            module.functions[0].body.insert(1, f"extra = parallel_state.{ACCESSORS[0]}()")
            files[path] = module.render().encode()
        tree = repo.replace_paths(base, files)
        warm, cold, parsed = [], [], 0
        for _ in range(repeat):
            cache = MemoryScanCache()
            TreeAllowlist(GitRepository(repo.git_dir), cache=cache).regenerate_tree(base)
            incremental = TreeAllowlist(GitRepository(repo.git_dir), cache=cache)
            before = cache.misses
            start = time.perf_counter()
            incremental.regenerate_tree(tree)
            warm.append(time.perf_counter() - start)
            parsed = cache.misses - before
            start = time.perf_counter()
            TreeAllowlist(GitRepository(repo.git_dir), cache=MemoryScanCache()).regenerate_tree(
                tree
            )
            cold.append(time.perf_counter() - start)
        return statistics.median(warm), statistics.median(cold), parsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prs", type=int, default=40)
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=6307)
    parser.add_argument("--keep", type=Path, help="build the repository here and keep it")
    parser.add_argument("--megatron", type=Path, help="a Megatron-LM clone: issue 16's figures")
    parser.add_argument("--push", type=int, default=25, help="--megatron: position pushed to")
    args = parser.parse_args(argv)
    if args.megatron is not None:
        from bench_integration_megatron import measure_megatron

        prs = 50 if "--prs" not in (argv or sys.argv) else args.prs
        return measure_megatron(args.megatron, prs, args.push, args.repeat)
    root = args.keep or Path(tempfile.mkdtemp(prefix="stackbot-bench-"))
    try:
        return measure(args, root)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def time_stackbot(bench: BenchRepo, mirrors: Path, repeat: int) -> dict[str, float]:
    """Cold (empty scan cache), base cached (the base tree scanned, as after any earlier run on
    this base) and re-run (every blob of the series cached, as when it is integrated again)."""
    cold_cache = MemoryScanCache()
    cold, _ = run_stackbot(bench, mirrors, cold_cache)
    base_cached, rerun = [], []
    for _ in range(repeat):
        cache = MemoryScanCache()
        with GitMirror.open_or_clone(str(bench.path), mirrors) as repo:
            base = repo.tree_of(repo.rev_parse("main"))
            TreeAllowlist(repo, cache=cache).scan(base, Generation.SCOPE)
        base_cached.append(run_stackbot(bench, mirrors, cache)[0])
        rerun.append(run_stackbot(bench, mirrors, copy.copy(cold_cache))[0])
    return {
        "cold": cold,
        "base cached": statistics.median(base_cached),
        "re-run": statistics.median(rerun),
    }


def measure(args: argparse.Namespace, root: Path) -> int:
    say(f"building a repository of {args.files} files and {args.prs} PR branches in {root} ...")
    bench = BenchRepo(root, args.files, args.prs, args.seed)
    bench.build()
    mirrors = root / "mirrors"
    with GitMirror.open_or_clone(str(bench.path), mirrors) as mirror:
        mirror.fetch()
        git_dir = mirror.git_dir
    _, result = run_stackbot(bench, mirrors, MemoryScanCache())
    counts = {o.value: sum(s.outcome is o for s in result.steps) for o in StepOutcome}
    say(f"stackbot steps: {counts}; timing ...")
    stackbot = time_stackbot(bench, mirrors, args.repeat)
    merged = [s.head_sha for s in result.steps if s.commit is not None]
    bare = statistics.median(
        run_bare_chain(git_dir, result.base_sha, merged) for _ in range(args.repeat)
    )
    say("worktree loop (a full scan after every merge) ...")
    loop, loop_tree = run_worktree_loop(bench, root, say)
    incremental, full, parsed = incremental_vs_full(bench, mirrors, 40, args.repeat)
    files = len(bench.modules) + len(bench.others) + 1
    print(f"repository: {files} files ({len(bench.modules)} in megatron/core), {args.prs} PRs")
    print(f"steps: {counts}")
    for label, seconds in stackbot.items():
        print(f"stackbot series integration, {label:<12} {seconds:8.3f}s")
    print(f"bare merge-tree + commit-tree chain:       {bare:8.3f}s")
    print(f"worktree loop, full-scan regeneration:     {loop:8.3f}s")
    for label, seconds in stackbot.items():
        print(
            f"{label:<12}: worktree loop / stackbot {loop / seconds:6.1f}x (goal >= 10x), "
            f"stackbot / bare chain {seconds / bare:5.2f}x (goal <= 1.5x)"
        )
    print(
        f"allowlist after a 40-file change: incremental {incremental * 1000:.1f}ms "
        f"({parsed} files parsed), full scan {full * 1000:.1f}ms: {full / incremental:.1f}x "
        "(goal >= 10x)"
    )
    same = loop_tree == result.final_tree
    print(f"final tree identical to the worktree loop's: {'yes' if same else 'NO'}")
    goals = {
        "same final tree as the worktree loop": same,
        ">= 10x faster than the worktree loop (cold)": loop / stackbot["cold"] >= 10,
        "within 1.5x of the bare chain (re-run)": stackbot["re-run"] / bare <= 1.5,
        "incremental regeneration >= 10x faster than a full scan": full / incremental >= 10,
    }
    for goal, met in goals.items():
        print(f"{'met   ' if met else 'MISSED'} {goal}")
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
