"""One interface for every place a job can run: submit, poll, cancel, collect.

A :class:`JobHandle` is plain data and round-trips through a string, so a restarted stackbot
worker can resume polling a job it submitted before.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from gpu_jobs._fields import ContractError, FieldReader
from gpu_jobs.filelock import file_lock
from gpu_jobs.spec import JobResult, JobSpec

Phase = Literal["queued", "running", "finished"]
ExecutorKind = Literal["local", "slurm"]


class ExecutorError(Exception):
    """The executor or its scheduler failed; the message says what to fix."""


class PoolBusy(ExecutorError):
    """Not enough free GPUs (or job slots) right now: submit again later."""


class StartUnknown(ExecutorError):
    """Whether an earlier submit of this job started it cannot be told now (the scheduler did
    not answer): submit again later, and never treat the job as not started."""


@dataclass(frozen=True)
class JobHandle:
    kind: ExecutorKind
    job_id: str
    out_dir: str
    data: dict[str, Any] = field(default_factory=dict)  # the executor's own: pids, Slurm id

    def to_str(self) -> str:
        body = {"job_id": self.job_id, "out_dir": self.out_dir, "data": self.data}
        return f"{self.kind}:{json.dumps(body, sort_keys=True, separators=(',', ':'))}"

    @classmethod
    def from_str(cls, text: str) -> JobHandle:
        kind, _, body = text.partition(":")
        if kind not in ("local", "slurm"):
            raise ContractError("handle", f"{text[:40]!r} is not a gpu_jobs job handle")
        try:
            r = FieldReader(json.loads(body), "handle")
        except ValueError:
            raise ContractError("handle", "the handle's JSON is damaged") from None
        data = r.raw("data", {})
        if not isinstance(data, dict):
            raise ContractError("handle.data", "expected an object")
        return cls(kind, r.text("job_id"), r.text("out_dir"), data)  # type: ignore[arg-type]

    @property
    def out_path(self) -> Path:
        return Path(self.out_dir)


@dataclass(frozen=True)
class JobState:
    phase: Phase
    node: str | None = None
    started_at: str | None = None  # ISO 8601, UTC
    finished_at: str | None = None
    scheduler_state: str = ""  # the scheduler's own word (Slurm's PENDING, RUNNING, ...)
    detail: str = ""


class Executor(Protocol):
    kind: ExecutorKind

    def submit(self, spec: JobSpec, out_dir: Path) -> JobHandle: ...

    def poll(self, handle: JobHandle) -> JobState: ...

    def cancel(self, handle: JobHandle) -> None: ...

    def collect(self, handle: JobHandle) -> JobResult: ...


def wait_for(
    executor: Executor,
    handle: JobHandle,
    *,
    timeout_s: float,
    poll_s: float = 0.5,
    on_state: Callable[[JobState], None] | None = None,
) -> JobResult:
    """Poll until the job finishes, then collect it. Raises TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: JobState | None = None
    while True:
        state = executor.poll(handle)
        if on_state is not None and state != last:
            on_state(state)
        last = state
        if state.phase == "finished":
            return executor.collect(handle)
        if time.monotonic() >= deadline:
            raise TimeoutError(f"job {handle.job_id} still {state.phase} after {timeout_s:g}s")
        time.sleep(poll_s)


def read_spec(out_dir: Path) -> JobSpec:
    try:
        return JobSpec.from_json((out_dir / "spec.json").read_text(encoding="utf-8"))
    except OSError as exc:
        raise ExecutorError(f"{out_dir}/spec.json cannot be read: {exc.strerror}") from None


SUBMIT_LOCK = ".submit.lock"


@contextmanager
def submit_lock(out_dir: Path) -> Iterator[None]:
    """Held while a job is submitted into ``out_dir`` (or adopted there): two submitters of
    one job (a re-claimed task and the one it was taken from) never both start it."""
    with file_lock(out_dir / SUBMIT_LOCK):
        yield


def prepare_out_dir(out_dir: Path) -> Path:
    """A fresh output directory: a job never lands on top of another's files (its submit lock
    aside)."""
    out_dir = out_dir.resolve()
    if out_dir.exists() and any(p.name != SUBMIT_LOCK for p in out_dir.iterdir()):
        raise ContractError("out_dir", f"{out_dir} is not empty; give each job its own directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir
