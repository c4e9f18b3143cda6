#!/usr/bin/env bash
# One command for a CUDA machine: say which devices every installed port can use, verify every
# preset on CUDA in each port that can use it at every rung of the precision ladder (float32,
# TF32, bfloat16 and float16, pure and mixed: `compare.py tolerances`, which also prints the gaps
# the CPU-measured bounds are checked against), and time vit-b16 at batch 64 there per rung,
# within about 8 minutes. Usage: benchmarks/gpu_check.sh OUT_DIR  (PYTHON=... for the interpreter).
# Writes OUT_DIR/devices.json, ladder-cuda.json / .md,
# time-vit-b16-b64-cuda-RUNG.json and summary.json.
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
# The ladder: every preset, every port, every rung (float32 first: the verification), one worker
# per framework; each entry is judged against the CPU-measured bounds and floors.
timeout 210 "$python" compare.py tolerances --device cuda --frameworks "$cuda_ports" \
    --rungs float32,tf32,bfloat16-pure,bfloat16-mixed,float16-pure,float16-mixed --timeout 180 \
    --json "$out/ladder-cuda.json" --markdown "$out/ladder-cuda.md" --force || status=$?
# vit-b16 at batch 64 per rung, the compiled forward only, short budgets: under 40 s a rung.
for dtype_args in "float32" "float32 --allow-tf32" "bfloat16 --precision mixed" \
                  "bfloat16 --precision pure" "float16 --precision mixed" "float16 --precision pure"; do
    name=$(echo "$dtype_args" | tr -d -- '-' | tr ' ' '-')
    # shellcheck disable=SC2086  # the rung's flags are words on purpose
    timeout 40 "$python" compare.py time --spec vit-b16 --batch 64 --device cuda --dtype $dtype_args \
        --frameworks "$cuda_ports" --modes compiled --budget 0.2 --max-repeats 10 --timeout 35 \
        --no-chart --force --json "$out/time-vit-b16-b64-cuda-$name.json" || status=$?
done

if [[ $status -eq 0 ]]; then summary ok; else summary "failed ($status)"; fi
echo "gpu_check: finished in $((SECONDS - start)) s with status $status; results in $out"
exit "$status"
