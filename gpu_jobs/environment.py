"""What a node runs tests with, as it reports it in each job result (``environment``).

Part of a result's key (issue 24): a result obtained with torch 2.5 / CUDA 12.4 is not reused
for a runner that now has torch 2.6. Read without importing torch (its version files only), so
it costs nothing on a node: ``python``, ``torch`` and ``cuda`` (``none`` for a CPU build), and
``image`` when the node runs in a container whose digest it is told through
``GPU_JOBS_IMAGE_DIGEST`` (Slurm's pyxis, Kubernetes: the deployment sets it).
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
from pathlib import Path

IMAGE_DIGEST_VARIABLE = "GPU_JOBS_IMAGE_DIGEST"
_ASSIGNMENT = re.compile(r"""^(__version__|cuda)\s*(?::[^=]*)?=\s*['"]?([^'"\s]*)['"]?""", re.M)


def runner_environment() -> dict[str, str]:
    found = {"python": platform.python_version()}
    found.update(_torch_versions())
    digest = os.environ.get(IMAGE_DIGEST_VARIABLE, "").strip()
    if digest:
        found["image"] = digest
    return found


def _torch_versions() -> dict[str, str]:
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return {"torch": "none"}
    try:
        text = (Path(spec.origin).parent / "version.py").read_text(encoding="utf-8")
    except OSError:
        return {"torch": "unknown"}
    values = dict(_ASSIGNMENT.findall(text))
    cuda = values.get("cuda") or "none"
    return {
        "torch": values.get("__version__") or "unknown",
        "cuda": "none" if cuda == "None" else cuda,
    }
