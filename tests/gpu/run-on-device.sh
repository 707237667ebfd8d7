#!/usr/bin/env bash
# The GPU suite and the SM90 reference runs, on a GPU host that has a GPU vLLM on PATH.
#
# On the project's H200 device machine (no network), after the three bundle calls described in
# ../shared/gpu-vllm/README.md, carry also `.gpu-vllm/deps` (pure-Python wheels for wikitools,
# made by `pip download -d .gpu-vllm/deps …`, see below) and run, in the repository root:
#
#     . .gpu-vllm/on-device.sh && bash tests/gpu/run-on-device.sh [tp1|tp2] /tmp/wiki-gpu-out
#
# tp1 (default): the GPU suite and the TP=1 reference runbook; tp2 (on two GPUs): preflight and
# the TP=2 test, which runs the TP=2 reference runbook. Then (BENCH=1, the default) the executor
# overhead benchmark. Records and logs go to the output folder; on the device machine they are
# also packed into $OUT/<mode>.tgz before the benchmark starts.
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
case $mode in
  tp1)
    # The whole suite (its TP=2 test skips on one GPU), then the TP=1 reference runbook.
    python3 -m pytest -q -p no:cacheprovider tests/gpu -rs 2>&1 | tee "$out/pytest.txt" | tail -n 25
    python3 -m wikitools runbook run wiki/reference/sm90-h200.md#sm90-llama1b-shape-tp1 --yes \
      2>&1 | tail -n 30 | tee "$out/run-tp1.txt"
    cp -r runbooks .artifacts "$out/" 2>/dev/null
    ;;
  tp2)
    # The TP=2 test runs the TP=2 reference runbook and keeps its record.
    WIKI_GPU_RECORDS_OUT=$out python3 -m pytest -q -p no:cacheprovider tests/gpu -rs \
      -k "preflight or tensor_parallel" 2>&1 | tee "$out/pytest.txt" | tail -n 25
    ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
[ -n "${OUT:-}" ] && tar -czf "$OUT/$mode.tgz" -C "$(dirname "$out")" "$(basename "$out")"
if [ "${BENCH:-1}" = 1 ]; then
  # Executor overhead next to a plain shell script, same engine, same GPU, same session.
  python3 scripts/make-dummy-model.py /tmp/wiki-models/llama-3.2-1b-shape
  python3 benchmarks/bench_executor.py --engine-bin "" --model /tmp/wiki-models/llama-3.2-1b-shape \
    --gpus 1 --env "" --json "$out/bench-executor.json" \
    --serve-args "--load-format dummy --max-model-len 2048 --gpu-memory-utilization 0.3 --enforce-eager" \
    2>&1 | tee "$out/bench-executor.txt" | tail -n 30
  [ -n "${OUT:-}" ] && cp "$out/bench-executor.txt" "$out/bench-executor.json" "$OUT/" 2>/dev/null
fi
echo "outputs in $out"
