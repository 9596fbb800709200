#!/bin/bash
# Started by srun on every node of gpu_jobs job run-3.blockwise-recipe.1x4 (inside the container
# when there is one). The runner takes its node rank and master from Slurm's variables.
set -euo pipefail
exec python3 -m gpu_jobs run /shared/stackbot/jobs/run-3.blockwise-recipe.1x4/spec.json --out /shared/stackbot/jobs/run-3.blockwise-recipe.1x4
