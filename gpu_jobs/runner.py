"""The node side of a job: ``python -m gpu_jobs run``.

Each node's runner gets the tree, runs the setup commands, waits for the other nodes, runs the
node check and then the tests under torchrun (one pytest per rank, one JUnit file per rank),
and writes ``nodes/node-R.json``. Node 0 then merges every node's report and every rank's JUnit
file into ``result.json``; the other nodes wait for it. One deadline (``timeout_s``) covers all
of it; on SIGTERM/SIGINT the torchrun tree is killed and the job ends ``cancelled``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TextIO

from gpu_jobs import checkout, node_prep
from gpu_jobs.causes import find_cause, rank_output
from gpu_jobs.environment import runner_environment
from gpu_jobs.junit import describe_ranks, junit_path, merge_ranks, read_rank_report
from gpu_jobs.launch import launch_env, runner_import_dir, torchrun_argv, with_python_path
from gpu_jobs.nodes import (
    NodeReport,
    StepVote,
    announce,
    clear_node_files,
    gather,
    wait_for_reports,
    write_atomic,
    write_report,
)
from gpu_jobs.phase import PhaseLaunch, PhaseOutcome, run_phase
from gpu_jobs.rendezvous import Placement
from gpu_jobs.spec import JobResult, JobSpec
from gpu_jobs.testsets import NODE_CHECK_TARGET
from gpu_jobs.verdict import decide

NODE_CHECK_LIMIT_S = 300.0
MERGE_GRACE_S = 60.0
PHASES = ("node_check", "tests")


class Aborted(Exception):
    """Stops the job before its tests; ``error_of`` and ``cause`` say whose fault it is and why
    when the runner knows (a tree without any of the targets is the tree's)."""

    def __init__(self, status: str, message: str, error_of: str = "", cause: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.error_of = error_of
        self.cause = cause


@dataclass(frozen=True)
class RunOptions:
    out_dir: Path
    placement: Placement
    run_id: str
    cache_dir: Path
    python: str = sys.executable


class ProgressLog:
    """Progress lines on stdout and in the node's runner log."""

    def __init__(self, path: Path, node_rank: int, stream: TextIO = sys.stdout) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("a", encoding="utf-8")
        self._stream = stream
        self._node = node_rank
        self._start = time.monotonic()

    def __call__(self, message: str) -> None:
        elapsed = int(time.monotonic() - self._start)
        line = f"[gpu_jobs node{self._node} {elapsed // 60:02d}:{elapsed % 60:02d}] {message}"
        for out in (self._stream, self._file):
            out.write(line + "\n")
            out.flush()


class StopFlag:
    """Set by SIGTERM/SIGINT (scancel, Slurm's time limit, an executor's cancel)."""

    def __init__(self) -> None:
        self.raised = False

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.raised = True

    def __call__(self) -> bool:
        return self.raised


def run_job(spec: JobSpec, options: RunOptions, stop: StopFlag | None = None) -> JobResult | None:
    """Run this node's part. Returns the job's result (None if node 0 never wrote one)."""
    stop = stop or StopFlag()
    node_rank = options.placement.node_rank
    say = ProgressLog(options.out_dir / f"runner-node{node_rank}.log", node_rank)
    started_at, start = _now(), time.monotonic()
    gpus = spec.shape.gpus_per_node
    ranks = tuple(range(node_rank * gpus, (node_rank + 1) * gpus))
    clear_node_files(options.out_dir, node_rank, ranks, PHASES)
    if node_rank == 0 and not (options.out_dir / "spec.json").exists():
        write_atomic(options.out_dir / "spec.json", spec.to_json())
    say(f"job {spec.job_id}: {spec.test_set} on {spec.shape}, ranks {describe_ranks(ranks)}")
    node = _NodeRun(spec, options, ranks, say, stop, deadline=start + spec.timeout_s)
    report = node.run()
    write_report(options.out_dir, report)
    if node_rank != 0:
        return _await_result(options.out_dir, start + spec.timeout_s + MERGE_GRACE_S, stop, say)
    if stop():
        # Cancelled: the scheduler's SIGKILL follows soon; give the other nodes a moment only.
        until, give_up = time.monotonic() + 3, (lambda: False)
    else:
        until, give_up = max(time.monotonic(), start + spec.timeout_s) + MERGE_GRACE_S, stop
    reports = wait_for_reports(options.out_dir, spec.shape.nodes, until, give_up)
    result = decide(
        spec,
        options.out_dir,
        reports,
        started_at=started_at,
        finished_at=_now(),
        total_s=time.monotonic() - start,
    )
    write_atomic(options.out_dir / "result.json", result.to_json())
    counts = result.counts
    say(
        f"result: {result.status} ({counts.passed} passed, {counts.failed} failed, "
        f"{counts.error} errors, {counts.skipped} skipped) {result.message}".rstrip()
    )
    say(f"result written to {options.out_dir / 'result.json'}")
    return result


class _NodeRun:
    def __init__(
        self,
        spec: JobSpec,
        options: RunOptions,
        ranks: tuple[int, ...],
        say: ProgressLog,
        stop: StopFlag,
        deadline: float,
    ) -> None:
        self.spec, self.options, self.ranks = spec, options, ranks
        self.say, self.stop, self.deadline = say, stop, deadline
        self.node_rank = options.placement.node_rank
        self._tree_args: tuple[str, ...] = ()
        self._voted = ""
        self.report = NodeReport(
            node_rank=self.node_rank,
            node_name=options.placement.node_name,
            ranks=ranks,
            logs={f"runner-node{self.node_rank}": say.path.name},
            environment=runner_environment(),
        )

    def run(self) -> NodeReport:
        setup_start = time.monotonic()
        try:
            tree, targets, device = self._setup()
            self._update(setup_s=time.monotonic() - setup_start)
            self._meet("setup", StepVote(True))
            if self.spec.node_check:
                self._node_check(device)
            self._tests(tree, targets, device)
        except Aborted as exc:
            self.say(f"stopping: {exc}")
            self._update(
                abort_status=exc.status,
                abort_message=str(exc),
                abort_error_of=exc.error_of,
                abort_cause=exc.cause,
            )
            if self.report.setup_s == 0.0:
                self._update(setup_s=time.monotonic() - setup_start)
            self._vote_failure_if_unvoted(exc)
        self._update(interrupted=self.stop())
        return self.report

    # -- steps -------------------------------------------------------------------------------

    def _setup(self) -> tuple[checkout.Tree, list[str], str]:
        spec = self.spec
        try:
            tree = checkout.prepare_tree(spec, self.options.cache_dir, self.say)
        except checkout.TreeError as exc:
            raise Aborted(exc.status, str(exc)) from None
        present, missing = checkout.split_targets(tree.root, spec.targets)
        self._update(commit=tree.commit, tree_root=str(tree.root), missing_targets=tuple(missing))
        if missing:
            self.say(f"setup: {len(missing)} target(s) absent from the tree: {', '.join(missing)}")
        if not present:
            raise Aborted(
                "error",
                f"targets: none of the targets exist in {tree.root}",
                error_of="tree",
                cause=f"none of the targets exist in the tree: {', '.join(missing)}",
            )
        env = launch_env(_environ(), spec.env, cpu=spec.launcher.device == "cpu")
        try:
            node_prep.run_setup_commands(
                spec.setup_commands,
                cwd=tree.root,
                env=env,
                log=self.options.out_dir / f"setup-node{self.node_rank}.log",
                deadline=self.deadline,
                should_stop=self.stop,
                say=self.say,
            )
            device = node_prep.choose_device(spec.launcher, spec.shape, self.options.python, env)
        except node_prep.PrepFailed as exc:
            # Out of time before any test ran: the node's fault, not the tests' (issue 13).
            status = "infra" if exc.status == "timeout" else exc.status
            raise Aborted(status, f"{exc}; no test ran") from None
        self._check_clock("setup")
        self.say(
            f"setup: tree {tree.root} ({tree.commit or 'not a git commit'}), ranks on {device}"
        )
        self._tree_args = tree.pytest_args
        return tree, present, device

    def _node_check(self, device: str) -> None:
        root = checkout.package_dir()
        if not (root / NODE_CHECK_TARGET).exists():
            raise Aborted("infra", f"the node-check suite {root / NODE_CHECK_TARGET} is missing")
        deadline = min(self.deadline, time.monotonic() + NODE_CHECK_LIMIT_S)
        outcome = self._phase("node_check", root, [NODE_CHECK_TARGET], device, deadline, offset=0)
        problem, cause = self._node_check_problem(outcome)
        self._update(node_check=outcome, node_check_message=problem)
        self._check_clock("node_check", outcome)
        self._meet("node_check", StepVote(not problem, problem), cause)

    def _tests(self, tree: checkout.Tree, targets: list[str], device: str) -> None:
        outcome = self._phase("tests", tree.root, targets, device, self.deadline, offset=1)
        self._update(tests=outcome)

    # -- helpers -----------------------------------------------------------------------------

    def _phase(
        self, name: str, cwd: Path, targets: list[str], device: str, deadline: float, offset: int
    ) -> PhaseOutcome:
        spec, out_dir = self.spec, self.options.out_dir
        phase_dir = out_dir / name
        rendezvous = self.options.placement.rendezvous
        if rendezvous.master_port is not None:
            # Each phase gets its own port: the previous store's socket may linger.
            rendezvous = replace(rendezvous, master_port=rendezvous.master_port + offset)
        reference_args = (
            ("-c", "/dev/null", f"--rootdir={cwd}") if name == "node_check" else self._tree_args
        )
        if name == "tests" and spec.markers is not None:
            reference_args = (*reference_args, "-m", spec.markers)
        extra_env = {**spec.env, "GPU_JOBS_PHASE_DIR": str(phase_dir)}
        if spec.launcher.backend is not None:
            extra_env["GPU_JOBS_BACKEND"] = spec.launcher.backend
        argv = torchrun_argv(
            self.options.python,
            nproc_per_node=spec.shape.gpus_per_node,
            rendezvous=rendezvous,
            log_dir=phase_dir / "torchrun-logs" / f"node{self.node_rank}",
            torchrun_args=spec.launcher.torchrun_args,
            pytest_args=(*reference_args, *spec.launcher.pytest_args),
            targets=targets,
        )
        launch = PhaseLaunch(
            name=name,
            phase_dir=phase_dir,
            out_dir=out_dir,
            argv=argv,
            cwd=cwd,
            # The ranks import the runner's pytest plugin, installed or not.
            env=with_python_path(
                launch_env(_environ(), extra_env, cpu=device == "cpu"),
                runner_import_dir(phase_dir / f"runner-path-node{self.node_rank}"),
            ),
            ranks=self.ranks,
            node_rank=self.node_rank,
            deadline=deadline,
            hang_grace_s=spec.launcher.hang_grace_s,
        )
        outcome = run_phase(launch, self.stop, self.say)
        logs = dict(self.report.logs)
        logs[f"torchrun-{name}-node{self.node_rank}"] = outcome.log
        self._update(logs=logs)
        return outcome

    def _node_check_problem(self, outcome: PhaseOutcome) -> tuple[str, str]:
        """What went wrong in the node check ("" when nothing did), and the error lines of the
        first rank whose output names an error (the cause, as a test phase's errors have)."""
        if outcome.timed_out or outcome.hung_ranks:
            ranks = describe_ranks(outcome.hung_ranks)
            return f"node check did not finish on ranks {ranks}", ""
        phase_dir = self.options.out_dir / "node_check"
        reports = {r: read_rank_report(junit_path(phase_dir, r), r) for r in self.ranks}
        silent = [rank for rank, report in reports.items() if report is None]
        if outcome.exit_code != 0 or silent:
            summary, cause = self._rank_error(phase_dir, outcome, silent or self.ranks)
            return (
                f"node check: torchrun exited {outcome.exit_code}, ranks "
                f"{describe_ranks(silent) or 'none'} wrote no report{summary}; see {outcome.log}"
            ), cause
        merged = merge_ranks(reports, self.ranks)
        if merged.counts.total == 0:
            return "node check collected no tests", ""
        bad = [t for t in merged.tests if t.outcome not in ("passed", "skipped")]
        if bad:
            return f"node check failed: {bad[0].nodeid}: {bad[0].message}", ""
        return "", ""

    def _rank_error(
        self, phase_dir: Path, outcome: PhaseOutcome, ranks: Sequence[int]
    ) -> tuple[str, str]:
        gpus = self.spec.shape.gpus_per_node
        for rank in ranks:
            log = self.options.out_dir / outcome.log
            lines = rank_output(phase_dir, log, self.node_rank, rank % gpus)
            found = find_cause(lines)
            if found is not None:
                return f" ({found.summary})", f"rank {rank}:\n{found.excerpt}"
        return "", ""

    def _meet(self, step: str, vote: StepVote, cause: str = "") -> None:
        """Wait until every node voted on ``step``; any failed or missing vote stops this node."""
        out_dir, nnodes = self.options.out_dir, self.spec.shape.nodes
        announce(out_dir, step, self.node_rank, self.options.run_id, vote)
        self._voted = step
        if not vote.ok:
            raise Aborted("infra", f"node {self.report.node_name}: {vote.message}", cause=cause)
        if nnodes == 1:
            return
        self.say(f"{step}: waiting for the other nodes")
        votes = gather(out_dir, step, nnodes, self.options.run_id, self.deadline, self.stop)
        self._check_clock(step)
        failed = {n: v for n, v in votes.items() if not v.ok}
        if failed:
            node, bad = min(failed.items())
            raise Aborted("infra", f"node {node} failed {step}: {bad.message}")
        absent = [n for n in range(nnodes) if n not in votes]
        if absent:
            raise Aborted("infra", f"node(s) {describe_ranks(absent)} never finished {step}")

    def _vote_failure_if_unvoted(self, exc: Aborted) -> None:
        # Other nodes waiting at a step must learn that this node will not come.
        for step in ("setup", "node_check"):
            if self._voted == step:
                continue
            path = self.options.out_dir / "nodes" / f"node-{self.node_rank}.{step}"
            if not path.exists():
                announce(
                    self.options.out_dir,
                    step,
                    self.node_rank,
                    self.options.run_id,
                    StepVote(False, str(exc)),
                )

    def _check_clock(self, step: str, outcome: PhaseOutcome | None = None) -> None:
        if self.stop() or (outcome is not None and outcome.interrupted):
            raise Aborted("cancelled", f"cancelled during {step}")
        if time.monotonic() >= self.deadline:
            if step in ("setup", "node_check"):
                # No test ran yet: an infra result, retried on another node (issue 13).
                raise Aborted(
                    "infra",
                    f"timed out after {self.spec.timeout_s:g}s during {step}, before any test ran",
                )
            raise Aborted("timeout", f"timed out after {self.spec.timeout_s:g}s during {step}")

    def _update(self, **changes: object) -> None:
        self.report = replace(self.report, **changes)  # type: ignore[arg-type]


def _await_result(
    out_dir: Path, until: float, stop: Callable[[], bool], say: ProgressLog
) -> JobResult | None:
    say("waiting for node 0 to merge the result")
    path = out_dir / "result.json"
    limit = time.monotonic() + 10 if stop() else until
    while time.monotonic() < limit:
        try:
            return JobResult.from_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            time.sleep(0.2)
    say("node 0 wrote no result.json in time")
    return None


def _environ() -> dict[str, str]:
    return dict(os.environ)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
