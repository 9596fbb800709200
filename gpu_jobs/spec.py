"""The contract between stackbot and GPU nodes: a versioned job spec and job result, as JSON.

The spec is here; the result and its one reader are in :mod:`gpu_jobs.result`, re-exported.
Both carry ``schema_version`` "MAJOR.MINOR". A reader refuses another major version with an
error naming the field; within its major version it refuses unknown fields (a misspelt field
must not be silently ignored) unless the document comes from a newer minor version, whose new
fields an older node may safely ignore.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from gpu_jobs._fields import ContractError, FieldReader, choice, loads_json, parse_version
from gpu_jobs.infra_signatures import InfraSignature, parse_signatures
from gpu_jobs.result import (
    JOB_STATUSES,
    OUTCOME_SEVERITY,
    OUTCOMES,
    RESULT_SCHEMA_VERSION,
    Counts,
    Durations,
    JobResult,
    JobStatus,
    NodeCheck,
    Outcome,
    TestResult,
    outcome_severity,
    worst_outcome,
)

SPEC_SCHEMA_VERSION = "1.4"
_SPEC_VERSION = parse_version(SPEC_SCHEMA_VERSION, "schema_version", 1)

Device = Literal["auto", "cuda", "cpu"]
Backend = Literal["nccl", "gloo"]

MAX_NODES = 1024
MAX_GPUS_PER_NODE = 64
JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SHAPE = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$")
_NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
MARKER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

__all__ = ["ContractError", "Counts", "Durations", "JobResult", "JobSpec", "LauncherOptions"]
__all__ += ["OUTCOME_SEVERITY", "Shape", "TestResult", "outcome_severity", "worst_outcome"]
__all__ += ["JOB_STATUSES", "OUTCOMES", "RESULT_SCHEMA_VERSION", "JobStatus", "NodeCheck"]
__all__ += ["Outcome"]


@dataclass(frozen=True, order=True)
class Shape:
    """Launch shape: nodes x GPUs (ranks) per node, written ``"2x4"``."""

    nodes: int
    gpus_per_node: int

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= MAX_NODES:
            raise ContractError("shape", f"nodes must be 1..{MAX_NODES}, got {self.nodes}")
        if not 1 <= self.gpus_per_node <= MAX_GPUS_PER_NODE:
            raise ContractError(
                "shape", f"GPUs per node must be 1..{MAX_GPUS_PER_NODE}, got {self.gpus_per_node}"
            )

    @classmethod
    def parse(cls, text: str, name: str = "shape") -> Shape:
        match = _SHAPE.match(text) if isinstance(text, str) else None
        if match is None:
            raise ContractError(name, f"{text!r} is not NODESxGPUS_PER_NODE, e.g. '1x4' or '2x4'")
        try:
            return cls(int(match[1]), int(match[2]))
        except ContractError as exc:
            raise ContractError(name, exc.problem) from None

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    def __str__(self) -> str:
        return f"{self.nodes}x{self.gpus_per_node}"


@dataclass(frozen=True)
class LauncherOptions:
    """How torchrun is started. ``device`` "auto" means CUDA when the node has it, else CPU."""

    master_port: int | None = None
    backend: Backend | None = None
    device: Device = "auto"
    torchrun_args: tuple[str, ...] = ()
    pytest_args: tuple[str, ...] = ()
    # A rank still running this long after another rank finished its session is called hung.
    hang_grace_s: float = 120.0

    def __post_init__(self) -> None:
        if self.master_port is not None and not 1 <= self.master_port <= 65535:
            raise ContractError("launcher.master_port", f"{self.master_port} is not a TCP port")
        if self.backend is not None:
            choice(self.backend, get_args(Backend), "launcher.backend")
        choice(self.device, get_args(Device), "launcher.device")
        if self.hang_grace_s <= 0:
            raise ContractError("launcher.hang_grace_s", "must be positive")

    def to_dict(self) -> dict[str, Any]:
        return {
            "master_port": self.master_port,
            "backend": self.backend,
            "device": self.device,
            "torchrun_args": list(self.torchrun_args),
            "pytest_args": list(self.pytest_args),
            "hang_grace_s": self.hang_grace_s,
        }

    @classmethod
    def from_reader(cls, r: FieldReader) -> LauncherOptions:
        backend = r.opt_text("backend")
        return cls(
            master_port=r.opt_integer("master_port"),
            backend=cast(Backend, choice(backend, get_args(Backend), r.name("backend")))
            if backend is not None
            else None,
            device=cast(
                Device, choice(r.text("device", "auto"), get_args(Device), r.name("device"))
            ),
            torchrun_args=r.texts("torchrun_args"),
            pytest_args=r.texts("pytest_args"),
            hang_grace_s=r.number("hang_grace_s", 120.0),
        )


@dataclass(frozen=True)
class JobSpec:
    """One test set x shape x tree. ``reference`` targets are gpu_jobs' own suites, resolved
    against the installed package rather than the checkout."""

    job_id: str
    test_set: str
    targets: tuple[str, ...]
    shape: Shape
    repo_url: str | None = None
    commit: str | None = None
    checkout: str | None = None
    reference: bool = False
    timeout_s: float = 3600.0
    env: dict[str, str] = field(default_factory=dict)
    launcher: LauncherOptions = field(default_factory=LauncherOptions)
    node_check: bool = True
    setup_commands: tuple[str, ...] = ()
    container_image: str | None = None
    # Test conventions (1.1): pytest's ``-m`` expression; markers whose failures are tolerated
    # (reported ``flaky``, not failed); and the world size a target needs, so a target run on
    # fewer ranks is reported as such instead of as ordinary failures.
    markers: str | None = None
    tolerated_markers: tuple[str, ...] = ()
    min_world_size: dict[str, int] = field(default_factory=dict)
    # Nodes the job must not run on (1.2): an infra failure is retried elsewhere, a broken node
    # is left out (Slurm's ``--exclude``; the local executor leaves out its GPUs named
    # ``gpuN``, and ignores other names: it runs on this host only).
    exclude_nodes: tuple[str, ...] = ()
    # Nodes the job must run on (1.4): a node check of one excluded node (Slurm's
    # ``--nodelist``; the local executor runs on exactly its GPUs named ``gpuN``).
    only_nodes: tuple[str, ...] = ()
    # Infrastructure signatures (1.3, gpu_jobs.infra_signatures): output lines that make a
    # failed job ``infra``. None (a spec from before 1.3): the node's built-in list.
    infra_signatures: tuple[InfraSignature, ...] | None = None
    schema_version: str = SPEC_SCHEMA_VERSION

    def __post_init__(self) -> None:
        check_conventions(self.markers, self.tolerated_markers, self.min_world_size, "")
        if not JOB_ID.match(self.job_id):
            raise ContractError(
                "job_id",
                f"{self.job_id!r} must be 1-100 of [A-Za-z0-9._-], not starting with . - _",
            )
        if not self.test_set.strip():
            raise ContractError("test_set", "must not be empty")
        if not self.targets or any(not t.strip() for t in self.targets):
            raise ContractError("targets", "must list at least one non-empty pytest target")
        if self.reference and any(t.startswith("/") or ".." in t.split("/") for t in self.targets):
            raise ContractError("targets", "reference targets are paths inside gpu_jobs")
        if not self.reference and self.checkout is None and self.repo_url is None:
            raise ContractError("repo_url", "give repo_url (with commit) or checkout")
        if self.repo_url is not None and (
            not self.repo_url.strip() or self.repo_url.startswith("-")
        ):
            # git would read a leading "-" as an option (a URL or path never starts so).
            raise ContractError("repo_url", f"{self.repo_url!r} is not a repository URL or path")
        if self.repo_url is not None and self.checkout is None and not self.commit:
            raise ContractError("commit", "is required with repo_url")
        if self.commit is not None and not re.fullmatch(r"[0-9a-fA-F]{7,64}", self.commit):
            raise ContractError("commit", f"{self.commit!r} is not a hex commit id")
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):  # NaN, inf: no deadline
            raise ContractError(
                "timeout_s", f"must be a positive, finite number of seconds, got {self.timeout_s}"
            )
        for key in self.env:
            if not _ENV_NAME.match(key):
                raise ContractError(f"env.{key}", "is not a valid environment variable name")
        for name, nodes in (("exclude_nodes", self.exclude_nodes), ("only_nodes", self.only_nodes)):
            for node in nodes:
                if not _NODE_NAME.match(node):
                    raise ContractError(name, f"{node!r} is not a node name")
        if set(self.only_nodes) & set(self.exclude_nodes):
            raise ContractError("only_nodes", "a node cannot be both required and excluded")

    def needed_world_size(self, nodeid: str) -> tuple[str, int] | None:
        """The target containing ``nodeid`` that needs more ranks than this job has, and how
        many it needs (the largest such need), or None."""
        found: tuple[str, int] | None = None
        for target, needs in self.min_world_size.items():
            bigger = found is None or needs > found[1]
            if bigger and needs > self.shape.world_size and target_contains(target, nodeid):
                found = (target, needs)
        return found

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "job_id": self.job_id,
            "test_set": self.test_set,
            "targets": list(self.targets),
            "shape": str(self.shape),
            "repo_url": self.repo_url,
            "commit": self.commit,
            "checkout": self.checkout,
            "reference": self.reference,
            "timeout_s": self.timeout_s,
            "env": dict(self.env),
            "launcher": self.launcher.to_dict(),
            "node_check": self.node_check,
            "setup_commands": list(self.setup_commands),
            "container_image": self.container_image,
            "markers": self.markers,
            "tolerated_markers": list(self.tolerated_markers),
            "min_world_size": dict(self.min_world_size),
            "exclude_nodes": list(self.exclude_nodes),
            "only_nodes": list(self.only_nodes),
            "infra_signatures": None
            if self.infra_signatures is None
            else [s.to_dict() for s in self.infra_signatures],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: object) -> JobSpec:
        r = FieldReader(data)
        version = parse_version(r.required("schema_version"), "schema_version", 1)
        launcher = r.obj("launcher")
        spec = cls(
            schema_version=SPEC_SCHEMA_VERSION,
            job_id=r.text("job_id"),
            test_set=r.text("test_set"),
            targets=r.texts("targets"),
            shape=Shape.parse(r.text("shape")),
            repo_url=r.opt_text("repo_url"),
            commit=r.opt_text("commit"),
            checkout=r.opt_text("checkout"),
            reference=r.flag("reference", False),
            timeout_s=r.number("timeout_s", 3600.0),
            env=r.text_map("env"),
            launcher=LauncherOptions.from_reader(launcher),
            node_check=r.flag("node_check", True),
            setup_commands=r.texts("setup_commands"),
            container_image=r.opt_text("container_image"),
            markers=r.opt_text("markers"),
            tolerated_markers=r.texts("tolerated_markers"),
            min_world_size=r.count_map("min_world_size"),
            exclude_nodes=r.texts("exclude_nodes"),
            only_nodes=r.texts("only_nodes"),
            infra_signatures=None
            if r.raw("infra_signatures") is None
            else parse_signatures(r.objects("infra_signatures")),
        )
        if version <= _SPEC_VERSION:
            r.refuse_unknown()
            launcher.refuse_unknown()
        return spec

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        return cls.from_dict(loads_json(text, "job spec"))


def target_contains(target: str, nodeid: str) -> bool:
    """Whether the test ``nodeid`` is selected by the pytest ``target`` (a directory, a file or
    a node id), both relative to the tree's root."""
    target = target.strip().rstrip("/")
    if target.startswith("./"):
        target = target[2:]
    return nodeid == target or nodeid.startswith((target + "::", target + "/", target + "["))


def check_conventions(
    markers: str | None,
    tolerated: tuple[str, ...],
    min_world_size: dict[str, int],
    where: str,
) -> None:
    """The test-convention fields of a spec or test set (``where`` prefixes the field names)."""
    if markers is not None and not markers.strip():
        raise ContractError(f"{where}markers", "must be a pytest -m expression or absent")
    for name in tolerated:
        if not MARKER_NAME.match(name):
            raise ContractError(f"{where}tolerated_markers", f"{name!r} is not a marker name")
    for target, needs in min_world_size.items():
        if not target.strip():
            raise ContractError(f"{where}min_world_size", "keys must be pytest targets")
        if type(needs) is not int or not 1 <= needs <= MAX_NODES * MAX_GPUS_PER_NODE:
            raise ContractError(
                f"{where}min_world_size.{target}", f"must be a number of ranks, got {needs!r}"
            )
