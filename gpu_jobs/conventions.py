"""A test set's conventions applied to the merged test outcomes (Megatron-LM's, by default).

Megatron-LM marks tests its CI tolerates (``flaky``, ``flaky_in_dev``) and writes its unit
tests for 8 GPUs. A test set says which markers it tolerates and how many ranks a target needs
(:class:`gpu_jobs.spec.JobSpec`'s ``tolerated_markers`` and ``min_world_size``); then:

- a failed or errored test carrying a tolerated marker is ``flaky``: shown, never a failure;
- a failed or errored test of a target that needs more ranks than the job has is an ``error``
  (it could not be judged on this shape), and the job says so instead of reporting ordinary
  failures.

Tolerance comes first: a flaky test is flaky on any shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from gpu_jobs.junit import MergedTests
from gpu_jobs.spec import Counts, JobSpec, TestResult

_NOT_PASSING = ("failed", "error")


@dataclass(frozen=True)
class Judged:
    merged: MergedTests
    tolerated: tuple[str, ...] = ()  # node ids now flaky
    # target -> (ranks it needs, node ids of its tests that failed for want of ranks)
    short_of_ranks: Mapping[str, tuple[int, tuple[str, ...]]] = field(default_factory=dict)


# How the message of a test run on fewer ranks than it needs starts (its failure is not judged).
NOT_JUDGED = "not judged:"


def apply_conventions(spec: JobSpec, merged: MergedTests) -> Judged:
    tolerated_markers = frozenset(spec.tolerated_markers)
    tests: list[TestResult] = []
    tolerated: list[str] = []
    short: dict[str, tuple[int, list[str]]] = {}
    world = spec.shape.world_size
    for test in merged.tests:
        if test.outcome not in _NOT_PASSING:
            tests.append(test)
            continue
        marks = sorted(merged.markers.get(test.nodeid, frozenset()) & tolerated_markers)
        needs = spec.needed_world_size(test.nodeid)
        if marks:
            note = f"tolerated: marked {', '.join(marks)} (was {test.outcome})"
            tests.append(replace(test, outcome="flaky", message=_noted(note, test.message)))
            tolerated.append(test.nodeid)
        elif needs is not None:
            target, ranks = needs
            note = f"{NOT_JUDGED} {target} needs {ranks} ranks, this job has {world}"
            tests.append(replace(test, outcome="error", message=_noted(note, test.message)))
            short.setdefault(target, (ranks, []))[1].append(test.nodeid)
        else:
            tests.append(test)
    counts = Counts.of_tests({t.nodeid: t.outcome for t in tests})
    judged = replace(merged, tests=tuple(tests), counts=counts)
    return Judged(
        judged,
        tuple(tolerated),
        {target: (ranks, tuple(ids)) for target, (ranks, ids) in short.items()},
    )


def short_of_ranks_message(judged: Judged, spec: JobSpec) -> str:
    """``tests/x.py needs 8 ranks and ran on 1 (shape 1x1): 18 of its tests failed ...``"""
    parts = []
    for target, (ranks, ids) in sorted(judged.short_of_ranks.items()):
        parts.append(
            f"{target} needs {ranks} ranks and ran on {spec.shape.world_size} "
            f"(shape {spec.shape}): {len(ids)} of its tests failed or errored and are not "
            f"judged; run it on a shape of at least {ranks} ranks"
        )
    return "; ".join(parts)


def tolerated_message(judged: Judged, spec: JobSpec) -> str:
    if not judged.tolerated:
        return ""
    count = len(judged.tolerated)
    markers = ", ".join(spec.tolerated_markers)
    return f"{count} test{'s' if count != 1 else ''} marked {markers} failed and tolerated (flaky)"


def _noted(note: str, message: str) -> str:
    return f"{note}\n{message}" if message else note
