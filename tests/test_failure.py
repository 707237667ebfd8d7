"""The line a failed run's box quotes: the exception a traceback ends with."""

from __future__ import annotations

from pathlib import Path

from wikitools.runbook.engines.failure import (
    better_message,
    exception_line,
    signal_death,
    strip_prefix,
)

FAILED_LOG = Path(__file__).parent / "fixtures" / "gpu" / "h200-x2" / "vllm-server-tp2-failed.log"


def test_real_tp2_failure_names_the_cublas_error():
    lines = FAILED_LOG.read_text().splitlines()
    assert exception_line(lines) == ("RuntimeError: CUDA error: CUBLAS_STATUS_INTERNAL_ERROR "
                                     "when calling `cublasCreate(handle)`")


def test_traceback_header_is_replaced_and_other_messages_kept():
    lines = ["INFO starting", "Traceback (most recent call last):", '  File "x.py", line 1',
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    msg = "fatal log line: (EngineCore pid=7) ERROR 11-30 09:50:52 [core.py:1] Traceback (most " \
          "recent call last):"
    assert better_message(msg, lines) == ("fatal log line: torch.OutOfMemoryError: CUDA out of "
                                          "memory. Tried to allocate 2.00 GiB")
    assert better_message("readiness timed out after 600 s", lines) == (
        "readiness timed out after 600 s")
    assert better_message(msg, ["no exception here"]) == msg
    assert better_message(None, lines) is None


def test_prefix_and_plain_exception_without_traceback():
    assert strip_prefix("(Worker_TP0 pid=1165) ERROR 11-30 09:50:52 [multiproc_executor.py:1007] "
                        "RuntimeError: x") == "RuntimeError: x"
    assert exception_line(["ValueError: bad --max-model-len", "KeyError: later"]) == (
        "ValueError: bad --max-model-len")
    assert exception_line(["Error: nothing", "frame #0: c10::Error::Error(...)"]) is None


SIGILL_LOG = Path(__file__).parent / "fixtures" / "engines" / "vllm-cpu-sigill.log"
CLEAN_LOG = Path(__file__).parent / "fixtures" / "engines" / "vllm-cpu-server.log"


def test_a_worker_killed_by_sigill_is_named_from_the_real_log():
    # vllm-cpu 0.32.0 with faulthandler on: "Fatal Python error: Illegal instruction", then
    # the executor's "died unexpectedly (exit code: None)" and "RuntimeError: cancelled"
    lines = SIGILL_LOG.read_text().splitlines()
    assert signal_death(lines) == "worker killed by SIGILL (illegal instruction)"
    assert exception_line(lines) != signal_death(lines)  # the traceback alone would mislead
    assert signal_death(CLEAN_LOG.read_text().splitlines()) is None


def test_a_negative_worker_exit_code_is_the_signal():
    line = ("(EngineCore pid=1) ERROR 12-04 19:04:38 [multiproc_executor.py:315] Worker proc "
            "VllmWorker-0 died unexpectedly (exit code: -11), shutting down executor.")
    assert signal_death([line]) == "worker killed by SIGSEGV (segmentation fault)"
    assert signal_death([line.replace("-11", "None")]) is None
    assert signal_death([line.replace("-11", "-999")]) is None
