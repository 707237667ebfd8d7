#!/usr/bin/env bash
# The GPU suite and the SM90 reference runbooks, on a GPU host without network (the project's H200
# device machine), one part per call so that every call ends inside its 600 s limit:
#
#   suite   the GPU test suite except the TP=2 test
#   tp1     the TP=1 vLLM reference runbook
#   tp2     the TP=2 vLLM reference runbook (two GPUs)
#   sglang  the SGLang twin of the TP=1 runbook
#   sglang-variants  the SGLang KV-format variants (BF16 and FP8 KV cache, KLD)
#   variants  the KV-format and memory-fraction variants of the TP=1 runbook (KLD, capacity,
#           probes, throughput per variant)
#   bench   the executor overhead benchmark
#
# Seen on the H200 machines (2026-11-30): the suite took ~295 s. tp1 with RUN_ARGS="--repeats 3
# --no-warmup" (32 requests per concurrent slot) took 546 s: ready after 95 s, and every
# `vllm bench serve` spends ~20 s starting before it sends a request, so the default (an extra
# warm-up run per point) does not fit one call. tp2 with one run per point and 64 requests took
# 336 s (ready after 157 s); with 32 requests per slot, use --repeats 2 --no-warmup at most.
# sglang with one run per point and 64 requests took 363 s in a fresh machine's first call (ready
# after 146 s, of which 77 s capturing CUDA graphs). A call that finds no warm machine adds about
# a minute to start it.
#
# Before the first of them, carry the engine bundle built by scripts/gpu-bundle/build.sh, one part
# per call, calls back to back (see scripts/gpu-bundle/on-device.sh). Then, in the repository root:
#
#   . .gpu-vllm/on-device.sh && bash tests/gpu/run-on-device.sh tp2
#
# with `.gpu-vllm/p*`, `.gpu-vllm/on-device.sh`, `.gpu-vllm/sha256` and `.gpu-vllm/deps` (wheels of
# the wiki's own dependencies the image lacks) carried. `sglang` sources .gpu-sglang/on-device.sh
# itself, in a subshell, so the two engines' packages never mix. RUN_ARGS are added to
# `wiki runbook run` (e.g. RUN_ARGS="--repeats 3"), RUN_TIMEOUT bounds it. Records, logs and the
# rendered pages are packed into $OUT/<mode>.tgz (one file: the device returns at most eight).
set -uo pipefail
mode=${1:-tp1}
out=${2:-/tmp/wiki-gpu-out/$mode}
mkdir -p "$out"
# The wheels of the wiki's own dependencies whose distribution the image does not have.
for d in .gpu-vllm/deps .gpu-sglang/deps; do
  [ -d "$d" ] || continue
  missing=()
  for w in "$d"/*.whl; do
    dist=$(basename "$w" | cut -d- -f1)
    python3 -c 'import importlib.metadata as m, sys; m.distribution(sys.argv[1])' "$dist" \
      2>/dev/null || missing+=("$w")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    python3 -m pip install -q --no-index --no-deps "${missing[@]}" 2>&1 | tail -n 3
  fi
done
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
# Client blocks call `wiki kld capture` and `wiki probe`: the checkout's CLI under that name.
mkdir -p /tmp/wiki-bin && printf '#!/bin/sh\nexec python3 -m wikitools "$@"\n' > /tmp/wiki-bin/wiki
chmod +x /tmp/wiki-bin/wiki && export PATH=/tmp/wiki-bin:$PATH
gpu_memory() { nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader; }
nvidia-smi > "$out/nvidia-smi.txt"; nvidia-smi topo -m > "$out/topo.txt" 2>&1
gpu_memory > "$out/gpu-memory-before.csv"
run() {  # PAGE#ID: run the runbook, keep the tail of its output. RUN_TIMEOUT=S interrupts it
  # after S seconds as Ctrl-C would: it tears down and writes its record, and the outputs are
  # still packed before the call's own limit.
  ${RUN_TIMEOUT:+timeout -s INT -k 60 $RUN_TIMEOUT} \
    python3 -m wikitools runbook run "$1" --yes ${RUN_ARGS:-} 2>&1 | tee "$out/run.txt" | tail -n 40
}
rc=0
case $mode in
  suite) python3 -m pytest -q -p no:cacheprovider tests/gpu -rs -k "not tensor_parallel" 2>&1 \
           | tee "$out/pytest.txt" | tail -n 25; rc=${PIPESTATUS[0]} ;;
  tp1) run wiki/reference/sm90-h200.md#sm90-llama1b-shape-tp1; rc=${PIPESTATUS[0]} ;;
  tp2) run wiki/reference/sm90-h200.md#sm90-llama1b-shape-tp2; rc=${PIPESTATUS[0]} ;;
  variants) run wiki/reference/sm90-h200.md#sm90-llama1b-kv-variants; rc=${PIPESTATUS[0]} ;;
  sglang) ( . .gpu-sglang/on-device.sh && [ -f /tmp/sglang-site/.ready ] &&
            run wiki/reference/sm90-h200-sglang.md#sm90-llama1b-shape-sglang-tp1 ); rc=$? ;;
  sglang-variants) ( . .gpu-sglang/on-device.sh && [ -f /tmp/sglang-site/.ready ] &&
            run wiki/reference/sm90-h200-sglang.md#sm90-llama1b-sglang-kv-variants ); rc=$? ;;
  bench)
    python3 scripts/make-dummy-model.py /tmp/wiki-models/llama-3.2-1b-shape
    python3 benchmarks/bench_executor.py --engine-bin "" --model /tmp/wiki-models/llama-3.2-1b-shape \
      --gpus 1 --env "" --json "$out/bench-executor.json" \
      --serve-args "--load-format dummy --max-model-len 2048 --gpu-memory-utilization 0.3 --enforce-eager" \
      2>&1 | tee "$out/bench-executor.txt" | tail -n 30 ;;
  *) echo "unknown mode $mode (suite, tp1, tp2, sglang, sglang-variants, variants, bench)" >&2; exit 2 ;;
esac
sleep 2; gpu_memory | tee "$out/gpu-memory-after.csv"
cp -r runbooks .artifacts wiki/reference "$out/" 2>/dev/null
# the compile and kernel caches stay on the machine (a later call's resumed run starts warm)
find "$out/.artifacts" -type d -name caches -prune -exec rm -rf {} + 2>/dev/null
[ -n "${OUT:-}" ] && tar -czf "$OUT/$mode.tgz" -C "$(dirname "$out")" "$(basename "$out")"
echo "$mode: exit $rc; outputs in $out"
exit $rc
