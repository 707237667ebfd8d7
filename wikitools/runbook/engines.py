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
