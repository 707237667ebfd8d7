#!/usr/bin/env bash
# Captures real outputs on a GPU host for the CPU test suite's parsers: nvidia-smi queries and
# topology, a vLLM server log, /metrics before and after a benchmark, and the benchmark's JSON.
# Usage (vllm on PATH):  bash tests/gpu/capture-fixtures.sh OUTDIR
set -uo pipefail
out=${1:?usage: capture-fixtures.sh OUTDIR}
mkdir -p "$out"
q=index,name,compute_cap,memory.total,memory.used,memory.free,driver_version,pci.bus_id,uuid
nvidia-smi --query-gpu=$q --format=csv,noheader,nounits > "$out/query-gpu.csv"
nvidia-smi > "$out/nvidia-smi.txt"
nvidia-smi topo -m > "$out/topo.txt" 2>&1
nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader,nounits > "$out/compute-apps-idle.csv"
model=/tmp/capture-model
python3 "$(dirname "$0")/../../scripts/make-dummy-model.py" "$model"
port=8123
setsid vllm serve "$model" --load-format dummy --host 127.0.0.1 --port $port \
  --gpu-memory-utilization 0.3 --max-model-len 2048 --enforce-eager > "$out/vllm-server.log" 2>&1 &
pid=$!
t0=$(date +%s%N)
for _ in $(seq 1 300); do
  code=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$port/health)
  [ "$code" = 200 ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.5
done
echo "health after $(( ($(date +%s%N) - t0) / 1000000 )) ms (code $code)" | tee "$out/timing.txt"
curl -s http://127.0.0.1:$port/metrics > "$out/metrics-before.txt"
curl -s http://127.0.0.1:$port/v1/models > "$out/models.json"
nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader,nounits > "$out/compute-apps-busy.csv"
nvidia-smi --query-gpu=$q --format=csv,noheader,nounits > "$out/query-gpu-busy.csv"
vllm bench serve --model "$model" --base-url http://127.0.0.1:$port --dataset-name random \
  --random-input-len 128 --random-output-len 32 --num-prompts 16 --max-concurrency 4 \
  --save-result --result-dir "$out" --result-filename bench.json > "$out/bench.stdout" 2>&1
curl -s http://127.0.0.1:$port/metrics > "$out/metrics-after.txt"
kill -TERM -- -$pid; sleep 5; kill -KILL -- -$pid 2>/dev/null
wait $pid 2>/dev/null
sleep 2
nvidia-smi --query-gpu=$q --format=csv,noheader,nounits > "$out/query-gpu-after.csv"
echo captured
