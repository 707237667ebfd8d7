"""Test double for the `sglang` package: `python -m sglang.launch_server` starts the fake server in
its SGLang flavour, `python -m sglang.bench_serving` writes a result shaped like SGLang's."""

__version__ = "0.0.0+fake"
