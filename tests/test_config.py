"""Settings: environment, TOML file, overrides, and refusal of unsafe production settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from stackbot.config import UnsafeSettingsError, load_settings


def test_embedded_defaults_need_nothing_else(tmp_path: Path) -> None:
    settings = load_settings()
    assert settings.executor == "local"
    assert settings.effective_database_url == f"sqlite:///{tmp_path / 'data' / 'stackbot.db'}"
    assert settings.generated_files == ["tools/process_group_usage_allowlist.json"]


def test_environment_variables_with_fixed_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKBOT_DATABASE_URL", "postgresql://u@db/stackbot")
    monkeypatch.setenv("STACKBOT_REPO", "NVIDIA/Megatron-LM")
    monkeypatch.setenv("STACKBOT_EXECUTOR", "slurm")
    monkeypatch.setenv("STACKBOT_GITHUB_API_URL", "https://ghe.example.com/api/v3")
    monkeypatch.setenv("STACKBOT_SLURM__PARTITION", "batch")
    settings = load_settings()
    assert settings.effective_database_url == "postgresql://u@db/stackbot"
    assert settings.repo == "NVIDIA/Megatron-LM"
    assert settings.executor == "slurm"
    assert settings.github_api_url == "https://ghe.example.com/api/v3"
    assert settings.slurm.partition == "batch"


def test_toml_file_and_environment_precedence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "stackbot.toml").write_text(
        'repo = "NVIDIA/Megatron-LM"\nexecutor = "slurm"\n'
        '[vetting]\nvetters = ["alice"]\ntrusted_authors = ["bob"]\n'
        "[slurm]\ntime_limit_minutes = 30\n"
    )
    settings = load_settings()
    assert settings.vetting.vetters == ["alice"]
    assert settings.slurm.time_limit_minutes == 30
    monkeypatch.setenv("STACKBOT_EXECUTOR", "local")
    assert load_settings().executor == "local"  # the environment wins over the file


def test_config_path_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "elsewhere.toml"
    path.write_text('public_url = "https://stackbot.example.com"\n')
    monkeypatch.setenv("STACKBOT_CONFIG", str(path))
    assert load_settings().public_url == "https://stackbot.example.com"
    monkeypatch.setenv("STACKBOT_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(FileNotFoundError, match=r"missing\.toml"):
        load_settings()


def test_unknown_keys_and_bad_values_are_refused(tmp_path: Path) -> None:
    (tmp_path / "stackbot.toml").write_text('exector = "slurm"\n')
    with pytest.raises(ValidationError, match="exector"):
        load_settings()
    (tmp_path / "stackbot.toml").unlink()
    with pytest.raises(ValidationError, match="owner/name"):
        load_settings(repo="Megatron-LM")
    with pytest.raises(ValidationError, match="executor"):
        load_settings(executor="kubernetes")


def test_app_auth_needs_both_parts(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="STACKBOT_GITHUB_PRIVATE_KEY_PATH"):
        load_settings(github_app_id=12345)


def test_serving_without_a_webhook_secret_is_refused_outside_dev() -> None:
    with pytest.raises(UnsafeSettingsError, match="STACKBOT_WEBHOOK_SECRET"):
        load_settings().check_safe_to_serve()
    with pytest.raises(UnsafeSettingsError, match="shorter"):
        load_settings(webhook_secret="short").check_safe_to_serve()
    load_settings(webhook_secret="x" * 32).check_safe_to_serve()
    load_settings(dev=True).check_safe_to_serve()


def test_secrets_are_not_shown_in_repr() -> None:
    settings = load_settings(webhook_secret="s3cret-value-0123456789", github_token="ghp_tok")
    assert "s3cret-value" not in repr(settings)
    assert "ghp_tok" not in repr(settings)
