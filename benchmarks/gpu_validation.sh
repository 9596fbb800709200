#!/usr/bin/env bash
# GPU validation of gpu_jobs on one GPU node (the figures in the gpu_jobs issue's note).
#   benchmarks/gpu_validation.sh OUT_DIR [DEMO_TREE]
# Runs, through the node-side runner (python -m gpu_jobs run), with node-check:
#   - blockwise-recipe reference suite, 1x1 on CUDA with NCCL;
#   - amax-group and blockwise-recipe reference suites, 1x4 with gloo on CUDA tensors (several
#     ranks share one GPU; NCCL refuses that, so 1x4/2x4 with NCCL need the multi-GPU kinds);
#   - the demo repository's integrated tree (if given), its test set targets, 1x4 gloo on CUDA;
# then the blockwise quantizer on CUDA: CPU/CUDA bit-exactness and the speed benchmark.
set -uo pipefail
out=${1:?usage: gpu_validation.sh OUT_DIR [DEMO_TREE]}
demo=${2:-}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count(), torch.cuda.get_device_name(0))'

job() {  # name, then runner arguments
  local name=$1; shift
  local start=$(date +%s.%N)
  python3 -m gpu_jobs run --out "$out/$name" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  local end=$(date +%s.%N)
  python3 - "$out/$name/result.json" "$name" "$rc" "$start" "$end" <<'PY'
import json, sys
path, name, rc, start, end = sys.argv[1:]
try:
    r = json.load(open(path))
except OSError:
    print(f"{name}: no result.json (exit {rc})"); sys.exit()
d = r["durations"]
print(f"{name}: {r['status']} (exit {rc}) counts={r['counts']} node_check={r['node_check']} "
      f"wall={float(end) - float(start):.1f}s setup={d['setup_s']:.1f}s "
      f"node_check={d['node_check_s']:.1f}s tests={d['tests_s']:.1f}s missing={r['missing_targets']}"
      + (f" message={r['message'][:200]!r}" if r['status'] != 'passed' else ""))
PY
}

job blockwise-1x1-nccl --reference --test-set blockwise-recipe --shape 1x1 --device cuda
job amax-1x4-gloo-cuda --reference --test-set amax-group --shape 1x4 --device cuda --backend gloo
job blockwise-1x4-gloo-cuda --reference --test-set blockwise-recipe --shape 1x4 --device cuda --backend gloo
if [ -n "$demo" ]; then
  job demo-amax-1x4-gloo-cuda --checkout "$demo" --test-set amax-group --shape 1x4 --device cuda --backend gloo
  job demo-blockwise-1x4-gloo-cuda --checkout "$demo" --test-set blockwise-recipe --shape 1x4 --device cuda --backend gloo
fi

python3 - <<'PY'
import torch
from gpu_jobs.reference.blockwise import quantize_blockwise
g = torch.Generator().manual_seed(0)
x = torch.randn(1024, 1000, generator=g) * torch.logspace(-30, 30, 1000)  # tiny to huge columns
x[0, :128] = 0.0
x[1, 5] = float("nan"); x[2, 7] = float("inf"); x[3, 9] = -3.0e38
for block in ((1, 128), (128, 128)):
    for fmt in ("e4m3", "e5m2"):
        for pow2 in (True, False):
            kw = dict(block=block, fp8_format=fmt, power_2_scale=pow2, amax_epsilon=1e-12)
            qc, sc = quantize_blockwise(x, **kw)
            qg, sg = quantize_blockwise(x.cuda(), **kw)
            same_q = torch.equal(qc.view(torch.uint8), qg.cpu().view(torch.uint8))
            same_s = torch.equal(sc.view(torch.int32), sg.cpu().view(torch.int32))
            print(f"CPU vs CUDA {block} {fmt} pow2={pow2}: q bit-exact={same_q} scale_inv bit-exact={same_s}")
PY
python3 benchmarks/bench_blockwise_quantizer.py --device cuda 2>&1 | tail -12
