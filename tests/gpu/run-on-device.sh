#!/usr/bin/env bash
# The GPU suite and the SM90 reference runs, on a GPU host that has a GPU vLLM on PATH.
#
# On the project's H200 device machine (no network), after the three bundle calls described in
# ../shared/gpu-vllm/README.md, carry also `.gpu-vllm/deps` (pure-Python wheels for wikitools,
# made by `pip download -d .gpu-vllm/deps …`, see below) and run, in the repository root:
#
#     . .gpu-vllm/on-device.sh && bash tests/gpu/run-on-device.sh [tp1|tp2] "$OUT"
#
# tp1 (default): pytest tests/gpu + the TP=1 reference runbook + the executor overhead benchmark.
# tp2: the same suite (its TP=2 test runs) + the TP=2 reference runbook. Records, logs and the
# rendered page are copied to OUTDIR.
set -uo pipefail
mode=${1:-tp1}
out=${2:-/tmp/wiki-gpu-out}
mkdir -p "$out"
if [ -d .gpu-vllm/deps ]; then
  python3 -m pip install -q --no-index --find-links .gpu-vllm/deps \
    markdown-it-py mdit-py-plugins jinja2 pyyaml httpx rich pytest 2>&1 | tail -n 3
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi > "$out/nvidia-smi.txt"; nvidia-smi topo -m > "$out/topo.txt" 2>&1
python3 -m pytest -q -p no:cacheprovider tests/gpu -rs --junitxml="$out/gpu-tests.xml" 2>&1 \
  | tee "$out/pytest.txt" | tail -n 25
case $mode in
  tp1) refs=(sm90-llama1b-shape-tp1) ;;
  tp2) refs=(sm90-llama1b-shape-tp2) ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
for rid in "${refs[@]}"; do
  python3 -m wikitools runbook run "wiki/reference/sm90-h200.md#$rid" --yes 2>&1 \
    | tail -n 30 | tee "$out/run-$rid.txt"
done
if [ "$mode" = tp1 ] && [ -f benchmarks/bench_executor.py ]; then
  python3 benchmarks/bench_executor.py --gpu 2>&1 | tee "$out/bench-executor.txt" | tail -n 30
fi
cp -r runbooks "$out/" 2>/dev/null
cp wiki/reference/sm90-h200.md "$out/"
tar -czf "$out/artifacts.tgz" .artifacts 2>/dev/null
echo "outputs in $out"
