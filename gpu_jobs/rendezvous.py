"""Where this node sits in a job: its node rank, the node count and the master's address.

Given explicitly (``--node-rank/--nnodes/--master-addr/--master-port``) or taken from Slurm's
environment. Slurm node names need not resolve (they do not on CI, where two node daemons share
one host), so the master's address falls back to ``scontrol show node``'s NodeAddr.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from gpu_jobs.launch import Rendezvous
from gpu_jobs.spec import Shape

# Slurm jobs get a port from their job id, so two jobs sharing a host do not collide; the range
# stays below Linux's ephemeral ports.
SLURM_PORT_BASE = 15000
SLURM_PORT_SPAN = 7000


class PlacementError(Exception):
    """This node's place in the job cannot be worked out; the message says what is missing."""


@dataclass(frozen=True)
class Placement:
    rendezvous: Rendezvous
    node_name: str

    @property
    def node_rank(self) -> int:
        return self.rendezvous.node_rank

    @property
    def nnodes(self) -> int:
        return self.rendezvous.nnodes


def placement(
    shape: Shape,
    *,
    node_rank: int | None = None,
    nnodes: int | None = None,
    master_addr: str | None = None,
    master_port: int | None = None,
    env: Mapping[str, str] | None = None,
) -> Placement:
    env = os.environ if env is None else env
    in_slurm = "SLURM_NNODES" in env and "SLURM_NODEID" in env and "SLURM_JOB_ID" in env
    if nnodes is None:
        nnodes = int(env["SLURM_NNODES"]) if in_slurm else shape.nodes
    if node_rank is None:
        node_rank = int(env["SLURM_NODEID"]) if in_slurm else 0
    if nnodes != shape.nodes:
        raise PlacementError(f"shape {shape} needs {shape.nodes} node(s), this job has {nnodes}")
    if not 0 <= node_rank < nnodes:
        raise PlacementError(f"node rank {node_rank} is outside 0..{nnodes - 1}")
    if nnodes > 1 and master_addr is None:
        if not in_slurm:
            raise PlacementError("a multi-node run needs --master-addr (or Slurm's environment)")
        master_addr = master_address(env["SLURM_JOB_NODELIST"])
    if master_port is None and in_slurm:
        master_port = SLURM_PORT_BASE + 2 * (int(env["SLURM_JOB_ID"]) % (SLURM_PORT_SPAN // 2))
    if master_port is None and nnodes > 1:
        raise PlacementError("a multi-node run needs --master-port")
    name = env.get("SLURMD_NODENAME") or socket.gethostname()
    return Placement(Rendezvous(nnodes, node_rank, master_addr, master_port), name)


def master_address(nodelist: str) -> str:
    first = first_host(nodelist)
    try:
        return socket.gethostbyname(first)
    except OSError:
        pass
    try:
        shown = _scontrol(["show", "node", first])
    except PlacementError as exc:
        raise PlacementError(f"node {first} does not resolve and {exc}") from None
    match = re.search(r"\bNodeAddr=(\S+)", shown)
    if match is None:
        raise PlacementError(f"node {first} does not resolve and scontrol shows no NodeAddr")
    return match[1]


def first_host(nodelist: str) -> str:
    """The first host of a Slurm node list ("n[1-2],gpu7" -> "n1") without scontrol."""
    head = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if head is None or not head[1]:
        raise PlacementError(f"cannot read the Slurm node list {nodelist!r}")
    if head[2] is None:
        return head[1]
    first = head[2].split(",")[0].split("-")[0]
    return f"{head[1]}{first}"


def _scontrol(args: list[str]) -> str:
    try:
        done = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PlacementError(f"scontrol failed: {exc}") from None
    if done.returncode != 0:
        raise PlacementError(f"scontrol {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout
