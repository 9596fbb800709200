#!/bin/bash
# Started by srun on every node of gpu_jobs job run-7.amax-group.2x4 (inside the container
# when there is one). The runner takes its node rank and master from Slurm's variables.
set -euo pipefail
source /opt/venv/bin/activate
pip install --no-deps -e /opt/stackbot
exec python3 -m gpu_jobs run /shared/stackbot/jobs/run-7.amax-group.2x4/spec.json --out /shared/stackbot/jobs/run-7.amax-group.2x4 --cache-dir /shared/stackbot/cache
