"""Fixtures around the GitHub stand-in: a running server with a Megatron-like repository,
people with different rights, and an installed GitHub App with a real RSA key.

Use them from a test package's ``conftest.py``::

    from tests.support.standin import *  # noqa: F403  (fixtures)

- ``app_key``: an RSA private key (PEM) for the App, made once per session;
- ``standin``: a :class:`StandinWorld` — the running server, its control API, the repository
  ``NVIDIA/Megatron-LM`` (``main`` with two files), users ``alice`` (NVIDIA member, author),
  ``bob`` (write access, a vetter), ``carol`` (outsider), the App (id 4242) installed on NVIDIA;
  deliveries are queued (``standin.control.flush_deliveries()`` sends them, after
  ``standin.control.configure_webhook(url, secret)``);
- ``shared_standin``: the same, one per test module, for tests that only read or that make
  their own objects;
- ``app_settings`` / ``token_settings``: stackbot settings pointing at the stand-in with App
  auth or with bob's personal token.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from stackbot.config import Settings, load_settings
from stackbot.standin import StandinControl, StandinServer

REPO = "NVIDIA/Megatron-LM"
ORG = "NVIDIA"
APP_ID = 4242
WEBHOOK_SECRET = "standin-webhook-secret-0123456789"
INITIAL_FILES = {
    "README.md": "# Megatron-LM (stand-in)\n",
    "megatron/core/parallel_state.py": "def get_tensor_model_parallel_group():\n    return None\n",
}


@dataclass
class AppKey:
    private_pem: str
    public_pem: str
    path: Path


@dataclass
class StandinWorld:
    server: StandinServer
    control: StandinControl
    repo: str
    app_id: int
    installation_id: int
    key: AppKey
    bob_token: str

    @property
    def url(self) -> str:
        return self.server.url


def make_rsa_key(directory: Path) -> AppKey:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    public_pem = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    path = directory / "app-private-key.pem"
    path.write_text(private_pem)
    path.chmod(0o600)
    return AppKey(private_pem, public_pem, path)


@pytest.fixture(scope="session")
def app_key(tmp_path_factory: pytest.TempPathFactory) -> AppKey:
    return make_rsa_key(tmp_path_factory.mktemp("app-key"))


def build_world(root: Path, key: AppKey, server: StandinServer) -> StandinWorld:
    control = server.control
    control.configure_webhook(None, WEBHOOK_SECRET, mode="queue")
    control.add_org(ORG)
    control.add_org_member(ORG, "alice")
    control.add_user("bob", name="Bob Vetter", email="bob@example.com")
    control.add_user("carol")
    control.create_repo(REPO, files=INITIAL_FILES, author="alice")
    control.set_permission(REPO, "bob", "write")
    control.register_app(public_key_pem=key.public_pem, owner=ORG, app_id=APP_ID, slug="stackbot")
    installation = control.install_app(APP_ID, ORG)
    return StandinWorld(
        server=server,
        control=control,
        repo=REPO,
        app_id=APP_ID,
        installation_id=installation.id,
        key=key,
        bob_token=control.create_token("bob"),
    )


@pytest.fixture
def standin(tmp_path: Path, app_key: AppKey) -> Iterator[StandinWorld]:
    with StandinServer(tmp_path / "standin") as server:
        yield build_world(tmp_path, app_key, server)


@pytest.fixture(scope="module")
def shared_standin(
    tmp_path_factory: pytest.TempPathFactory, app_key: AppKey
) -> Iterator[StandinWorld]:
    """One stand-in for a whole test module (tests must not depend on each other's changes)."""
    root = tmp_path_factory.mktemp("standin")
    with StandinServer(root) as server:
        yield build_world(root, app_key, server)


@pytest.fixture
def app_settings(standin: StandinWorld, tmp_path: Path) -> Settings:
    return load_settings(
        dev=True,
        data_dir=tmp_path / "data",
        github_api_url=standin.url,
        github_app_id=standin.app_id,
        github_private_key_path=standin.key.path,
        repo=standin.repo,
        webhook_secret=WEBHOOK_SECRET,
    )


@pytest.fixture
def token_settings(standin: StandinWorld, tmp_path: Path) -> Settings:
    return load_settings(
        dev=True,
        data_dir=tmp_path / "data",
        github_api_url=standin.url,
        github_token=standin.bob_token,
        repo=standin.repo,
        webhook_secret=WEBHOOK_SECRET,
    )
