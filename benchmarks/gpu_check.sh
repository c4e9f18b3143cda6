#!/usr/bin/env bash
# One command for a CUDA machine: say which devices every installed port can use, verify every
# preset on CUDA in each port that can use it, and time vit-b16 at batch 64 there, within about
# 8 minutes. Usage: benchmarks/gpu_check.sh OUT_DIR  (PYTHON=... to pick the interpreter).
# Writes OUT_DIR/devices.json, verify-cuda.json, time-vit-b16-b64-cuda.json and summary.json.
# On a machine without a CUDA device it prints the device table, says so, writes summary.json
# with status "no-cuda" and exits 0: nothing was verified or timed on a GPU.
set -euo pipefail

out="${1:?usage: benchmarks/gpu_check.sh OUT_DIR}"
python="${PYTHON:-python}"
cd "$(dirname "$0")/.."
mkdir -p "$out"
start=$SECONDS

"$python" compare.py devices --json "$out/devices.json"

cuda_ports=$("$python" - "$out/devices.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["entries"]
print(",".join(r["framework"] for r in rows if r["device"] == "cuda" and r["usable"]))
PY
)

summary() {  # status, then the frameworks checked
    "$python" -c 'import json, sys; json.dump({"status": sys.argv[1], "cuda_frameworks":
        [f for f in sys.argv[2].split(",") if f], "seconds": int(sys.argv[3])},
        open(sys.argv[4], "w"), indent=2)' "$1" "$cuda_ports" "$((SECONDS - start))" "$out/summary.json"
}

if [[ -z "$cuda_ports" ]]; then
    echo
    echo "gpu_check: NO CUDA DEVICE on this machine: no port can use CUDA (see the table above)."
    echo "gpu_check: nothing was verified or timed on a GPU; $out/summary.json says status no-cuda."
    summary no-cuda
    exit 0
fi
echo
echo "gpu_check: CUDA ports: $cuda_ports"

status=0
# Every preset on CUDA; each framework's worker gets 180 s (vit-b16's float64 reference runs on
# the CPU in this process first).
timeout 240 "$python" compare.py verify --all-presets --device cuda --frameworks "$cuda_ports" \
    --timeout 180 --json "$out/verify-cuda.json" || status=$?
# vit-b16 at batch 64: short phase budgets so every port fits in the remaining 3 minutes.
timeout 180 "$python" compare.py time --spec vit-b16 --batch 64 --device cuda \
    --frameworks "$cuda_ports" --budget 0.5 --max-repeats 20 --eval-batches 2 --timeout 150 \
    --no-chart --force --json "$out/time-vit-b16-b64-cuda.json" || status=$?

if [[ $status -eq 0 ]]; then summary ok; else summary "failed ($status)"; fi
echo "gpu_check: finished in $((SECONDS - start)) s with status $status; results in $out"
exit "$status"
