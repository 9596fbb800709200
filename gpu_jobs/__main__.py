"""``python -m gpu_jobs``: run a job on this node, merge a job's result, list test sets.

Exit status of ``run``: 0 only when the job passed; 1 when it ran and did not pass; 2 for bad
input (the message names the field).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from gpu_jobs import __version__
from gpu_jobs._fields import ContractError
from gpu_jobs.checkout import default_cache_dir
from gpu_jobs.nodes import write_atomic
from gpu_jobs.rendezvous import PlacementError, placement
from gpu_jobs.result import JobResult
from gpu_jobs.runner import RunOptions, StopFlag, run_job
from gpu_jobs.spec import JOB_ID, JobSpec, LauncherOptions, Shape
from gpu_jobs.testsets import load_test_sets
from gpu_jobs.verdict import result_from_out_dir

EXIT_PASSED, EXIT_NOT_PASSED, EXIT_BAD_INPUT = 0, 1, 2
T = TypeVar("T")


class BadInput(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gpu_jobs", description="Run stackbot's GPU test jobs on this node."
    )
    parser.add_argument("--version", action="version", version=f"gpu_jobs {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser(
        "run",
        help="run a job (SPEC.json, or --checkout/--target/--shape) and write DIR/result.json",
        description="Run one job's part on this node. Multi-node placement comes from the "
        "--node-rank/--nnodes/--master-* options or from Slurm's environment.",
    )
    run.add_argument("spec", nargs="?", type=Path, help="job spec JSON file")
    run.add_argument("--out", type=Path, required=True, help="job output directory (shared)")
    ad_hoc = run.add_argument_group("a job without a spec file")
    ad_hoc.add_argument("--checkout", type=Path, help="tree to test")
    ad_hoc.add_argument("--target", action="append", default=[], help="pytest target (repeat)")
    ad_hoc.add_argument("--shape", help="NODESxGPUS_PER_NODE, e.g. 1x4")
    ad_hoc.add_argument("--test-set", help="take targets from this test set")
    ad_hoc.add_argument("--test-sets-file", type=Path, help="TOML file of test sets")
    ad_hoc.add_argument("--reference", action="store_true", help="targets are gpu_jobs suites")
    ad_hoc.add_argument("--timeout", type=float, help="seconds for the whole job")
    ad_hoc.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    ad_hoc.add_argument("--backend", choices=["nccl", "gloo"])
    ad_hoc.add_argument("--no-node-check", action="store_true", help="skip the node check")
    ad_hoc.add_argument("--job-id", help="job id (default: a random one)")
    conventions = run.add_argument_group(
        "test conventions (added to the test set's; see gpu_jobs.conventions)"
    )
    conventions.add_argument("--markers", help="pytest -m expression, e.g. 'not internal'")
    conventions.add_argument(
        "--tolerate",
        action="append",
        default=[],
        metavar="MARKER",
        help="failures of tests with this marker are reported flaky (repeat)",
    )
    conventions.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="set for every rank"
    )
    conventions.add_argument(
        "--min-world-size",
        action="append",
        default=[],
        metavar="TARGET=N",
        help="ranks TARGET needs; on fewer its failures are reported as such (repeat)",
    )
    place = run.add_argument_group("placement (default: Slurm's environment, else one node)")
    place.add_argument("--node-rank", type=int)
    place.add_argument("--nnodes", type=int)
    place.add_argument("--master-addr")
    place.add_argument("--master-port", type=int)
    run.add_argument("--run-id", help="tells this run's files from an earlier run's")
    run.add_argument("--cache-dir", type=Path, help="where fetched repositories are kept")

    merge = commands.add_parser(
        "merge", help="merge the nodes' reports in DIR into DIR/result.json (a collector)"
    )
    merge.add_argument("--out", type=Path, required=True)

    sets = commands.add_parser("test-sets", help="list the test sets")
    sets.add_argument("--file", type=Path, help="TOML file (default: the built-in one)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "merge":
            return _merge(args.out)
        return _list_test_sets(args.file)
    except (BadInput, ContractError, PlacementError) as exc:
        print(f"gpu_jobs: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _run(args: argparse.Namespace) -> int:
    try:
        _check_placement_options(args)
        spec = _spec_from(args)
    except (BadInput, ContractError) as exc:
        if args.spec is not None:  # a spec file: its job gets a result that says what is wrong
            _write_refusal(args.out, args.spec, f"{exc}")
        raise
    where = placement(
        spec.shape,
        node_rank=args.node_rank,
        nnodes=args.nnodes,
        master_addr=args.master_addr,
        master_port=args.master_port or spec.launcher.master_port,
    )
    run_id = args.run_id or os.environ.get("SLURM_JOB_ID") or spec.job_id
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"out: cannot create {args.out}: {exc.strerror}") from None
    stop = StopFlag()
    stop.install()
    options = RunOptions(
        out_dir=args.out.resolve(),
        placement=where,
        run_id=run_id,
        cache_dir=args.cache_dir or default_cache_dir(),
    )
    result = run_job(spec, options, stop)
    return EXIT_PASSED if result is not None and result.passed else EXIT_NOT_PASSED


def _check_placement_options(args: argparse.Namespace) -> None:
    """The command line's placement is checked as the spec's is (``launcher.master_port``)."""
    if args.master_port is not None and not 1 <= args.master_port <= 65535:
        raise BadInput(f"--master-port: {args.master_port} is not a TCP port (1 .. 65535)")
    if args.nnodes is not None and args.nnodes < 1:
        raise BadInput(f"--nnodes: {args.nnodes} is not a number of nodes")
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        raise BadInput(f"--timeout: {args.timeout} is not a positive, finite number of seconds")


def _spec_from(args: argparse.Namespace) -> JobSpec:
    if args.spec is not None:
        if args.checkout or args.target or args.shape or args.test_set:
            raise BadInput("give either SPEC.json or --checkout/--target/--shape, not both")
        try:
            data = args.spec.read_bytes()
        except OSError as exc:
            raise BadInput(f"spec: cannot read {args.spec}: {exc.strerror}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadInput(
                f"spec: {args.spec} is not UTF-8 text (byte {exc.start}); write the spec as "
                "UTF-8 JSON"
            ) from None
        return JobSpec.from_json(text)
    if not args.shape:
        raise BadInput("shape: give SPEC.json, or --shape with --target or --test-set")
    targets = list(args.target)
    test_set_name = args.test_set or "ad-hoc"
    timeout = args.timeout
    env: dict[str, str] = {}
    markers: str | None = None
    tolerated: list[str] = []
    min_world_size: dict[str, int] = {}
    if args.test_set:
        sets = load_test_sets(args.test_sets_file)
        if args.test_set not in sets:
            known = ", ".join(sorted(sets))
            raise BadInput(f"test_set: unknown test set {args.test_set!r} (known: {known})")
        chosen = sets[args.test_set]
        targets = targets or list(chosen.targets(args.reference))
        timeout = timeout or chosen.timeout_s
        env, markers = dict(chosen.env), chosen.markers
        tolerated, min_world_size = list(chosen.tolerated_markers), dict(chosen.min_world_size)
    env.update(_pairs(args.env, "env", str))
    min_world_size.update(_pairs(args.min_world_size, "min_world_size", _ranks))
    tolerated += [name for name in args.tolerate if name not in tolerated]
    if not targets:
        raise BadInput("targets: give --target (repeatable) or --test-set")
    if args.checkout is None and not args.reference:
        raise BadInput("checkout: give --checkout DIR, or --reference for gpu_jobs' suites")
    return JobSpec(
        job_id=args.job_id or f"adhoc-{uuid.uuid4().hex[:8]}",
        test_set=test_set_name,
        targets=tuple(targets),
        shape=Shape.parse(args.shape),
        checkout=str(args.checkout.resolve()) if args.checkout else None,
        reference=args.reference,
        timeout_s=timeout or 3600.0,
        env=env,
        launcher=LauncherOptions(device=args.device, backend=args.backend),
        node_check=not args.no_node_check,
        markers=args.markers if args.markers is not None else markers,
        tolerated_markers=tuple(tolerated),
        min_world_size=min_world_size,
    )


def _pairs(items: list[str], name: str, value: Callable[[str], T]) -> dict[str, T]:
    found: dict[str, T] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"{name}: {item!r} is not KEY=VALUE")
        try:
            found[key.strip()] = value(text)
        except ValueError:
            raise BadInput(f"{name}: {item!r}: {text!r} is not a number of ranks") from None
    return found


def _ranks(text: str) -> int:
    ranks = int(text)
    if ranks < 1:
        raise ValueError(text)
    return ranks


def _write_refusal(out_dir: Path, spec_path: Path, message: str) -> None:
    """``result.json`` with status ``error`` for a spec that cannot be run, so whoever waits
    for the job (stackbot polls for that file) learns why instead of waiting for a timeout."""
    job_id = _job_id_in(spec_path)
    result = JobResult(job_id, "error", f"the job spec cannot be run: {message}")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(out_dir / "result.json", result.to_json())
    except OSError as exc:
        print(f"gpu_jobs: cannot write {out_dir / 'result.json'}: {exc.strerror}", file=sys.stderr)


def _job_id_in(spec_path: Path) -> str:
    """The spec's job id when it has a valid one, else one naming the spec file's directory."""
    try:
        raw = json.loads(spec_path.read_bytes().decode("utf-8", errors="replace"))
        candidate = raw.get("job_id") if isinstance(raw, dict) else None
    except (OSError, ValueError, RecursionError):
        candidate = None
    if isinstance(candidate, str) and JOB_ID.fullmatch(candidate):
        return candidate
    return "invalid-spec"


def _merge(out_dir: Path) -> int:
    try:
        spec = JobSpec.from_json((out_dir / "spec.json").read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInput(f"out: {out_dir} has no readable spec.json ({exc.strerror})") from None
    result = result_from_out_dir(spec, out_dir)
    print(f"{result.status}: {result.message}".rstrip(": "))
    return EXIT_PASSED if result.passed else EXIT_NOT_PASSED


def _list_test_sets(path: Path | None) -> int:
    for name, test_set in sorted(load_test_sets(path).items()):
        shapes = ", ".join(str(s) for s in test_set.shapes)
        print(f"{name}  [{shapes}]  {test_set.description}")
        for target in test_set.megatron_targets:
            print(f"    megatron:  {target}")
        for target in test_set.reference_targets:
            print(f"    reference: {target}")
        for key, value in test_set.conventions().items():
            print(f"    {key}: {value}")
    return EXIT_PASSED


if __name__ == "__main__":
    sys.exit(main())
