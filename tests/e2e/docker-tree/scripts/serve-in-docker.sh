#!/bin/bash
# The tiny model served in a container, started by a script of the repository: a runbook runs
# its own copy of this file, with the run's --label added to the docker run.
set -eu
docker run -d --rm --name "wiki-e2e-script-${WIKI_E2E_TAG:-local}" \
  --label "wiki-e2e=${WIKI_E2E_TAG:-local}" \
  --network host --ipc=host --shm-size 1g \
  -e VLLM_CPU_KVCACHE_SPACE=1 -e HF_HUB_OFFLINE=1 \
  -v "${ENGINE_ENV:?}:/opt/venv:ro" -v "${PYTHON_HOME:?}:${PYTHON_HOME:?}:ro" \
  -v "${TINY_MODEL:?}:/model:ro" \
  --entrypoint bash wiki-test/bookworm:minbase-v1 \
  -lc 'exec vllm serve /model --load-format dummy --served-model-name tiny \
    --max-model-len 512 --enforce-eager --host 127.0.0.1 --port 18478'
