"""Typed settings: environment variables prefixed ``STACKBOT_`` plus an optional TOML file.

One ``Settings`` object is built by :func:`load_settings`; nothing reads the environment
elsewhere. Tests build their own with keyword overrides. The TOML file is ``stackbot.toml`` in
the working directory, or the path in ``STACKBOT_CONFIG``; environment variables win over it.

Nested sections (``[slurm]``, ``[local]``, ``[worker]``, ``[vetting]``) can also be set from
the environment with a double underscore: ``STACKBOT_SLURM__PARTITION=batch``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

DEFAULT_ALLOWLIST_PATH = "tools/process_group_usage_allowlist.json"
MIN_WEBHOOK_SECRET_LENGTH = 16


class UnsafeSettingsError(ValueError):
    """Settings that would be unsafe in production; the message says what to set."""


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "stackbot"


class VettingSettings(BaseModel):
    """Who may approve test runs (``/ok to test <sha>``) and whose PRs run without approval."""

    vetters: list[str] = Field(default_factory=list)
    trusted_authors: list[str] = Field(default_factory=list)
    # Members of these organisations are trusted authors and vetters (copy-pr-bot's rule).
    trusted_orgs: list[str] = Field(default_factory=list)
    # Collaborator permissions that make someone a vetter.
    vetter_permissions: list[str] = Field(default_factory=lambda: ["admin", "maintain", "write"])


class LocalExecutorSettings(BaseModel):
    # GPU indices handed out through CUDA_VISIBLE_DEVICES; empty means "detect", and a machine
    # without GPUs runs the same ranks on CPU with gloo.
    gpus: list[int] = Field(default_factory=list)
    max_parallel_jobs: int = 1
    master_port_base: int = 29600


class SlurmExecutorSettings(BaseModel):
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit_minutes: int = 60
    container_image: str | None = None
    container_mounts: list[str] = Field(default_factory=list)
    extra_sbatch_args: list[str] = Field(default_factory=list)
    setup_commands: list[str] = Field(default_factory=list)
    poll_interval_s: float = 2.0
    # Where job output lands; must be visible from the login node and the compute nodes.
    shared_dir: Path | None = None
    python: str = "python3"


class WorkerSettings(BaseModel):
    lease_seconds: float = 60.0
    poll_interval_s: float = 0.5
    max_attempts: int = 6
    backoff_base_s: float = 2.0
    backoff_cap_s: float = 300.0
    reconcile_interval_s: float = 600.0


class MaintenanceSettings(BaseModel):
    """What the periodic ``maintenance`` task removes and when (see services/maintenance.py)."""

    # One round per period of this length, whatever the number of workers.
    interval_s: float = Field(default=86400.0, gt=0)
    # Integration refs (refs/stackbot/<kind>/<name>/) whose last run is older than this.
    run_ref_retention_days: float = Field(default=30.0, ge=0)
    # Output directories (logs, JUnit) of jobs finished longer ago than this.
    job_output_retention_days: float = Field(default=30.0, ge=0)
    # The runner's repository cache: checkouts unused for this long, then the least recently
    # used ones until the cache fits in ``runner_cache_max_gb``.
    runner_cache_max_age_days: float = Field(default=14.0, ge=0)
    runner_cache_max_gb: float = Field(default=200.0, ge=0)
    # Repack every mirror (and drop unreachable objects) in each round.
    repack: bool = True
    # How long an integration waits for a repack of its mirror before retrying later.
    lock_wait_s: float = Field(default=30.0, ge=0)


class LandingSettings(BaseModel):
    """``/stackbot land``: how PRs are merged and how often a waiting landing looks again."""

    # The merge button's method per repository (``{"NVIDIA/Megatron-LM": "squash"}``); others
    # use ``merge_method``. ``"queue"``: the repository requires GitHub's merge queue; the
    # landing enqueues its PRs (the queue's own method makes the commits) and answers the
    # ``merge_group`` checks from the tested tree.
    merge_methods: dict[str, Literal["merge", "squash", "rebase", "queue"]] = Field(
        default_factory=dict
    )
    merge_method: Literal["merge", "squash", "rebase", "queue"] = "merge"
    # How long a landing waiting for its tree's tests waits before it looks again.
    recheck_s: float = Field(default=30.0, gt=0)
    # The gate: how many landings of a repository are tested at once, each on top of the ones
    # ahead of it (1: one at a time, no speculation).
    window: int = Field(default=3, ge=1)

    def method_for(self, repo: str) -> str:
        return self.merge_methods.get(repo, self.merge_method)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="STACKBOT_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    dev: bool = False
    data_dir: Path = Field(default_factory=default_data_dir)
    database_url: str | None = None

    webhook_secret: SecretStr | None = None
    github_token: SecretStr | None = None
    github_app_id: int | None = None
    github_private_key_path: Path | None = None
    github_api_url: str = "https://api.github.com"
    repo: str | None = None
    # GitHub's content-creation limits, which every write is paced to stay under.
    github_writes_per_minute: int = Field(default=80, ge=1)
    github_writes_per_hour: int = Field(default=500, ge=1)
    # Replies to commands in PR comments, per user and repository in any hour (0: none). A
    # non-vetter also gets at most one reply per PR.
    command_replies_per_hour: int = Field(default=5, ge=0)
    # Base URL of the dashboard, used for links in PR comments and check runs.
    public_url: str = "http://127.0.0.1:8000"
    # Who may read the dashboard and /api: "open" (anyone who reaches the port), "proxy" (only
    # requests carrying `dashboard_user_header`, set by an authenticating reverse proxy such as
    # oauth2-proxy in front of stackbot), or "off" (no dashboard, no /api: 404). The webhook
    # endpoint and /healthz are never restricted; /metrics follows this setting.
    dashboard_access: Literal["open", "proxy", "off"] = "open"
    dashboard_user_header: str = Field(default="X-Forwarded-User", min_length=1)

    executor: Literal["local", "slurm"] = "local"
    local: LocalExecutorSettings = Field(default_factory=LocalExecutorSettings)
    slurm: SlurmExecutorSettings = Field(default_factory=SlurmExecutorSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    maintenance: MaintenanceSettings = Field(default_factory=MaintenanceSettings)
    vetting: VettingSettings = Field(default_factory=VettingSettings)
    landing: LandingSettings = Field(default_factory=LandingSettings)

    # Paths the repository regenerates rather than merges.
    generated_files: list[str] = Field(default_factory=lambda: [DEFAULT_ALLOWLIST_PATH])
    # Optional: run the repository's own checker instead of (and compared with) the built-in one.
    allowlist_checker_command: str | None = None
    # The Python >= 3.12 that parses files for the allowlist scan (Megatron-LM's grammar); unset:
    # this one if >= 3.12, else found on PATH or in pyenv (stackbot.adapters.scanner_process).
    scanner_python: str | None = None
    # Scanner processes a cold scan is split over (0: one per CPU, at most 4).
    scanner_processes: int = Field(default=0, ge=0, le=64)
    # TOML file with test sets; None means gpu_jobs' built-in test sets.
    test_sets_file: Path | None = None
    # Run gpu_jobs' node-check (a subgroup all-reduce and an FP8 cast) before each job's tests,
    # which tells infrastructure failures (status infra) from test failures. It costs one more
    # torchrun launch per job.
    job_node_check: bool = True
    # Test sets run for every series unless the series config says otherwise.
    default_test_sets: list[str] = Field(default_factory=lambda: ["amax-group", "blockwise-recipe"])
    # How trees are chosen for GPU jobs (issue 13): "series-first" tests the series tree (every
    # live PR merged in series order), confirms a new failure by a rerun and bisects it over
    # prefixes of the series order to the PR that introduced it; a PR the series run leaves out
    # or cannot merge is tested on its own stack. "every-stack" tests every PR's stack and the
    # series tree.
    test_plan_policy: Literal["series-first", "every-stack"] = "series-first"
    # At most this many jobs of one series start or run at once (0: no limit), so one series
    # cannot hold every node.
    max_running_jobs_per_series: int = Field(default=4, ge=0)
    # An infra result (node check failed, a rank lost, a node failure, a timeout before any
    # test ran) is retried on another node this many times; never counted as a test result.
    infra_retries: int = Field(default=2, ge=0, le=10)
    # Quarantine (issue 26; the defaults are argued in stackbot/domain/quarantine.py): a test
    # seen flaky this many times within the window is quarantined for its repository; released
    # after this many consecutive clean runs; expires after this many days unless renewed.
    quarantine_flaky_count: int = Field(default=3, ge=1, le=100)
    quarantine_window_days: int = Field(default=14, ge=1, le=365)
    quarantine_release_after: int = Field(default=30, ge=1, le=10_000)
    quarantine_expiry_days: int = Field(default=30, ge=1, le=365)
    # Broken nodes (issue 26; the defaults are argued in stackbot/domain/broken_nodes.py): a
    # node whose latest this many jobs were all infra, within the window, is left out of the
    # next submissions until a node check passes on it; checked again after so many minutes,
    # doubled after each failed check up to so many hours.
    node_infra_count: int = Field(default=2, ge=1, le=100)
    node_window_hours: int = Field(default=72, ge=1, le=24 * 90)
    node_recheck_minutes: int = Field(default=30, ge=1, le=24 * 60)
    node_recheck_max_hours: int = Field(default=24, ge=1, le=24 * 30)
    # Bases a PR must not be merged into (shell patterns): Megatron-LM's CI mirror branches,
    # which a child may be stacked on while its parent is vetted. Such a PR gets a failing
    # `stackbot/base` check and one comment asking to retarget it before merging.
    protected_base_patterns: list[str] = Field(default_factory=lambda: ["pull-request/*"])
    # Authors whose branches `/stackbot restack` may push to (a PR's author can also allow it
    # for one restack with `/stackbot restack --push`).
    restack_push_authors: list[str] = Field(default_factory=list)
    # Remote branch prefix integration commits are pushed to (None: keep them local).
    push_remote: str | None = None
    push_branch_prefix: str = "stackbot/"

    git_fetch_timeout_s: float = 300.0
    max_webhook_bytes: int = 25 * 1024 * 1024
    # Modules whose register_tasks(registry) adds task handlers (plugins, tests); env as a JSON
    # list: STACKBOT_EXTRA_TASK_MODULES='["pkg.tasks"]'.
    extra_task_modules: list[str] = Field(default_factory=list)

    @field_validator("repo")
    @classmethod
    def _repo_is_owner_slash_name(cls, value: str | None) -> str | None:
        if value is not None and (
            value.count("/") != 1 or value.startswith("/") or value.endswith("/")
        ):
            raise ValueError(f"STACKBOT_REPO must be 'owner/name', got {value!r}")
        return value

    @model_validator(mode="after")
    def _app_auth_is_complete(self) -> Settings:
        if (self.github_app_id is None) != (self.github_private_key_path is None):
            raise ValueError(
                "GitHub App auth needs both STACKBOT_GITHUB_APP_ID and "
                "STACKBOT_GITHUB_PRIVATE_KEY_PATH"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        toml_path = config_file_path()
        if toml_path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_path))
        return tuple(sources)

    # -- derived values ---------------------------------------------------------------------

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'stackbot.db'}"

    @property
    def mirrors_dir(self) -> Path:
        return self.data_dir / "mirrors"

    @property
    def jobs_dir(self) -> Path:
        return self.data_dir / "jobs"

    @property
    def runner_cache_dir(self) -> Path:
        """The runner's repository cache (what the executors pass as ``--cache-dir``)."""
        base = self.slurm.shared_dir if self.executor == "slurm" else None
        return (base or self.data_dir) / "runner-cache"

    def ensure_dirs(self) -> None:
        for path in (self.data_dir, self.mirrors_dir, self.jobs_dir):
            path.mkdir(parents=True, exist_ok=True)

    def check_safe_to_serve(self) -> None:
        """Refuse settings that would expose an unauthenticated webhook outside development."""
        if self.dev:
            return
        secret = self.webhook_secret.get_secret_value() if self.webhook_secret else ""
        if not secret:
            raise UnsafeSettingsError(
                "STACKBOT_WEBHOOK_SECRET is not set: outside development mode every webhook "
                "must be signed. Set it to the secret configured on the GitHub webhook, or set "
                "STACKBOT_DEV=1 for local development."
            )
        if len(secret) < MIN_WEBHOOK_SECRET_LENGTH:
            raise UnsafeSettingsError(
                f"STACKBOT_WEBHOOK_SECRET is shorter than {MIN_WEBHOOK_SECRET_LENGTH} characters; "
                "use a long random value (e.g. `python -c 'import secrets; print(secrets.token_hex(32))'`)."
            )


def config_file_path() -> Path | None:
    explicit = os.environ.get("STACKBOT_CONFIG")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise FileNotFoundError(f"STACKBOT_CONFIG points at {path}, which is not a file")
        return path
    default = Path("stackbot.toml")
    return default if default.is_file() else None


def load_settings(**overrides: Any) -> Settings:
    """Build settings from the environment and TOML file; keyword overrides win (for tests)."""
    return Settings(**overrides)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, built once. Tests should call :func:`load_settings` instead."""
    return load_settings()
