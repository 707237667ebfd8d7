#!/usr/bin/env bash
# On the GPU host, from the repository root, source it:  . .gpu-vllm/on-device.sh  (or .gpu-sglang)
# Copies the carried part(s) to /tmp/gpu-ENGINE-parts, which lasts between calls while the machine
# stays warm (calls must follow each other within its idle limit). Once every part is there and the
# checksum matches, unpacks the bundle into /tmp/ENGINE-site and exports PYTHONPATH (and, for vLLM,
# a `vllm` command on /tmp/vllm-bin). Later calls on the same machine only re-export.
# NVLink multicast must stay off on shared hosts (it can take the host's GPUs out of service):
# keep NCCL, PyTorch and NVSHMEM off it, and vLLM's FlashInfer all-reduce off its multicast
# (mnnvl) backend. The runbook executor keeps these in every server it starts, too.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
  VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm
_gb_dir=$(dirname "${BASH_SOURCE[0]:-$0}")
_gb_engine=$(basename "$_gb_dir"); _gb_engine=${_gb_engine#.gpu-}
_gb_parts=/tmp/gpu-$_gb_engine-parts
_gb_site=/tmp/$_gb_engine-site
mkdir -p "$_gb_parts"
cp "$_gb_dir"/p*/part.* "$_gb_parts"/ 2>/dev/null
if [ ! -f "$_gb_site/.ready" ]; then
  _gb_have=$(cat "$_gb_parts"/part.* 2>/dev/null | sha256sum | cut -c1-64)
  if [ "$_gb_have" != "$(cat "$_gb_dir/sha256" 2>/dev/null)" ]; then
    echo "gpu-$_gb_engine: parts so far: $(ls "$_gb_parts" | tr '\n' ' ')- carry the next part (the machine must stay warm between calls)"
    return 0 2>/dev/null || exit 0
  fi
  mkdir -p "$_gb_site" && cat "$_gb_parts"/part.* | xz -d | tar -x -C "$_gb_site" && touch "$_gb_site/.ready"
  if [ "$_gb_engine" = vllm ]; then
    mkdir -p /tmp/vllm-bin
    printf '#!/bin/sh\nexport PYTHONPATH=/tmp/vllm-site${PYTHONPATH:+:$PYTHONPATH}\nexec python3 -m vllm.entrypoints.cli.main "$@"\n' > /tmp/vllm-bin/vllm
    chmod +x /tmp/vllm-bin/vllm
  fi
fi
export PYTHONPATH=$_gb_site${PYTHONPATH:+:$PYTHONPATH} HF_HUB_OFFLINE=1 DO_NOT_TRACK=1
if [ "$_gb_engine" = vllm ]; then
  # The FlashInfer sampler's JIT build adds about 90 s to every start.
  export PATH=/tmp/vllm-bin:$PATH VLLM_NO_USAGE_STATS=1 \
    VLLM_USE_FLASHINFER_SAMPLER=${VLLM_USE_FLASHINFER_SAMPLER:-0}
fi
echo "gpu-$_gb_engine: ready - $(python3 -c "import $_gb_engine as m; print('$_gb_engine', m.__version__)" 2>&1 | tail -1)"
