"""Engine facts as data: launcher spellings, default ports, endpoints, fatal log patterns.

Sources: reference/engines-and-benchmarks.md §3 (endpoints, log anchors) and
reference/community-wiki-formats.md §4 (launcher spellings seen in the community wiki).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Engine:
    name: str
    default_port: int
    health_path: str  # readiness probe: refused/503 = starting, 200 = ready
    metrics_path: str  # where backend markers / KV capacity / spec counters are read
    models_path: str
    version_command: tuple[str, ...]  # argv printing the version (bare-metal installs)
    python_modules: tuple[str, ...]  # `python -m MODULE` spellings that start a server
    ready_log: tuple[str, ...]  # log lines that mean "listening"
    fatal_log: tuple[str, ...]  # regexes: a match in the log means start-up failed


_COMMON_FATAL = (
    r"Traceback \(most recent call last\)",
    r"CUDA out of memory",
    r"torch\.OutOfMemoryError",
    r"RuntimeError: ",
    r"Address already in use",
)

VLLM = Engine(
    name="vllm",
    default_port=8000,
    health_path="/health",
    metrics_path="/metrics",
    models_path="/v1/models",
    version_command=("vllm", "--version"),
    python_modules=("vllm.entrypoints.openai.api_server", "vllm.entrypoints.cli.main"),
    ready_log=(
        "Application startup complete.",
        "Starting vLLM server on",
        "Starting vLLM API server",
    ),
    fatal_log=(
        *_COMMON_FATAL,
        r"EngineDeadError",
        r"No available memory for the cache blocks",
        r"Available KV cache memory: -",
        r"Engine core initialization failed",
    ),
)

SGLANG = Engine(
    name="sglang",
    default_port=30000,
    health_path="/health_generate",
    metrics_path="/server_info",
    models_path="/v1/models",
    version_command=("python3", "-c", "import sglang; print(sglang.__version__)"),
    python_modules=("sglang.launch_server",),
    ready_log=("The server is fired up and ready to roll!", "Uvicorn running on"),
    fatal_log=(*_COMMON_FATAL, r"Scheduler hit an exception", r"Not enough memory"),
)

ENGINES: dict[str, Engine] = {"vllm": VLLM, "sglang": SGLANG}

# Python modules that are clients, mapped to the tool name used by plan/clients.
CLIENT_MODULES = {
    "sglang.bench_serving": "sglang-bench",
    "lm_eval": "lm-eval",
}

# Substrings of a docker image name that tell the engine when the command is the image default.
IMAGE_HINTS = (("sglang", "sglang"), ("vllm", "vllm"))


def engine(name: str | None) -> Engine | None:
    return ENGINES.get(name or "")


def default_port(name: str | None) -> int:
    e = engine(name)
    return e.default_port if e else 8000


def engine_for_image(image: str | None) -> str | None:
    low = (image or "").lower()
    for hint, name in IMAGE_HINTS:
        if hint in low:
            return name
    return None


# --------------------------------------------------------------------------- flags

# docker run options that take a value (long names without '='; short ones)
DOCKER_VALUE_FLAGS = {
    "-e", "--env", "-v", "--volume", "-p", "--publish", "--gpus", "--ipc", "--shm-size", "--name",
    "--network", "--net", "--entrypoint", "-w", "--workdir", "-u", "--user", "--ulimit",
    "--runtime", "--env-file", "--mount", "-l", "--label", "--cpus", "--cpuset-cpus", "-m",
    "--memory", "--device", "--add-host", "--cap-add", "--cap-drop", "--security-opt",
    "--restart", "--platform", "--pull", "--pid", "--hostname", "-h", "--log-driver", "--log-opt",
    "--memory-swap", "--group-add", "--stop-signal", "--stop-timeout", "--tmpfs", "--dns",
    "--cgroupns", "--uts", "--userns", "--health-cmd", "--gpus-all", "--cidfile",
    "--volumes-from", "--link", "--mac-address", "--ip", "--expose", "--label-file",
}
DOCKER_BOOL_SHORT = set("dit")  # -d -i -t and combinations (-it, -dit)

# engine flags (all spellings) → the EngineCommand field they set
SERVER_FLAG_ALIASES = {
    "--tensor-parallel-size": "tp", "-tp": "tp", "--tp": "tp", "--tp-size": "tp",
    "--pipeline-parallel-size": "pp", "-pp": "pp", "--pp": "pp", "--pp-size": "pp",
    "--data-parallel-size": "dp", "-dp": "dp", "--dp": "dp", "--dp-size": "dp",
    "--decode-context-parallel-size": "dcp", "-dcp": "dcp", "--dcp": "dcp", "--dcp-size": "dcp",
    "--enable-expert-parallel": "ep", "--ep": "ep", "-ep": "ep",
    "--expert-parallel-size": "ep_size", "--ep-size": "ep_size",
    "--port": "port", "--host": "host",
    "--quantization": "quantization", "-q": "quantization",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--model": "model", "--model-path": "model",
    "--speculative-config": "speculative", "-sc": "speculative",
}
# canonical spellings for flags kept in `flags`
CANONICAL_FLAGS = {
    "--speculative-algo": "--speculative-algorithm",
    "-O": "--compilation-config",
    "-cc": "--compilation-config",
}
# flags that take no value (engines and clients)
BOOL_FLAGS = {
    "--trust-remote-code", "--enable-expert-parallel", "--enable-prefix-caching",
    "--no-enable-prefix-caching", "--enable-chunked-prefill", "--no-enable-chunked-prefill",
    "--enable-auto-tool-choice", "--async-scheduling", "--no-async-scheduling", "--enforce-eager",
    "--disable-custom-all-reduce", "--enable-metrics", "--disable-log-requests",
    "--disable-log-stats", "--enable-flashinfer-autotune", "--sleep-on-idle",
    "--language-model-only", "--enable-pcie-oneshot-allreduce", "--no-scheduler-reserve-full-isl",
    "--disable-radix-cache", "--enable-torch-compile", "--disable-cuda-graph", "--ep",
    "--enable-dp-attention", "--skip-server-warmup", "--enable-log-requests",
    "--enable-mixed-chunk", "--save-result", "--save-detailed", "--append-result",
    "--ignore-eos", "--disable-tqdm", "--disable-ignore-eos", "--disable-stream",
    "--apply-chat-template", "--flush-cache", "--output-details", "--return-logprob",
    "--profile", "--log_samples", "--log-samples", "--apply_chat_template",
    "--fewshot_as_multiturn", "--enable-sleep-mode", "--enable-lora", "-it",
    "--headless", "--skip-tokenizer-init", "--cache-report", "--plot-throughput",
    "--tokenize-prompt", "--enable-expert-parallel-load-balancer", "--enable-eplb",
    "--enable-dbo", "--enable-return-routed-experts",
}


# client flags → the ClientCommand field they set
CLIENT_FLAG_KEYS = {
    "--model": "model", "--base-url": "base_url", "--host": "host", "--port": "port",
    "--backend": "backend", "--dataset-name": "dataset", "--dataset": "dataset",
    "--num-prompts": "num_prompts", "--max-concurrency": "max_concurrency",
    "--request-rate": "request_rate",
}

