"""GPU accounting (issue 13 point 5): what a job cost and what reuse saved, pure.

A job's cost is nodes x GPUs per node x wall seconds (its ``shape`` is ``"NODESxGPUS"``). A
copy that reuses another job's result costs 0 of its own; what it saved is its source's cost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

_SHAPE = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$")

PURPOSES = ("baseline", "tree", "confirm", "bisect", "retry")


def gpus_of_shape(shape: str) -> int:
    """``"2x4"`` -> 8; a shape that is not NODESxGPUS is an error naming it."""
    match = _SHAPE.match(shape)
    if match is None:
        raise ValueError(f"job shape {shape!r} is not NODESxGPUS_PER_NODE, e.g. '2x4'")
    return int(match[1]) * int(match[2])


def gpu_seconds(shape: str, started: datetime | None, finished: datetime | None) -> float:
    """GPUs x wall seconds; 0 when the job never started (no start time) or the times are
    reversed."""
    if started is None or finished is None:
        return 0.0
    if (started.tzinfo is None) != (finished.tzinfo is None):  # SQLite reads back naive UTC
        started, finished = started.replace(tzinfo=None), finished.replace(tzinfo=None)
    wall = (finished - started).total_seconds()
    return gpus_of_shape(shape) * max(wall, 0.0)


@dataclass
class GpuHours:
    """GPU-hours spent, split by purpose, and GPU-hours that reuse did not spend."""

    by_purpose: dict[str, float] = field(default_factory=dict)
    saved_by_reuse: float = 0.0

    @property
    def total(self) -> float:
        return sum(self.by_purpose.values())

    def add(self, purpose: str, seconds: float) -> None:
        self.by_purpose[purpose] = self.by_purpose.get(purpose, 0.0) + seconds / 3600.0


def policy_saving_hours(
    untested_stacks: int, mean_seconds_by_config: dict[str, float], gpus_by_config: dict[str, int]
) -> float:
    """The estimate of what series-first did not spend: stacks it did not test x, for each
    configuration, that configuration's mean measured duration x its GPUs."""
    per_stack = sum(
        mean_seconds_by_config[c] * gpus_by_config.get(c, 0) for c in mean_seconds_by_config
    )
    return untested_stacks * per_stack / 3600.0
