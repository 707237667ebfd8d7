"""One error hierarchy: every expected error is a WikiError, and `wiki` turns each into its exit
code and a one-line message, never a traceback."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import wikitools
from wikitools import cli
from wikitools.core.errors import CheckFailed, InputError, UsageError, WikiError
from wikitools.runbook.engines.clients import ResultError
from wikitools.runbook.engines.shell import ShellSyntaxError
from wikitools.runbook.records.record import RecordError

# Control flow that never leaves its module: the executor's step failure and interruption, the
# parser's usage exit, and the record schema's error inside a msgspec hook (a ValueError, which
# msgspec locates; schema.py turns it into a RecordError), each caught where it is raised.
INTERNAL = {"StepFailed", "Interrupted", "_UsageExit", "_Located"}


def _modules():
    for info in pkgutil.walk_packages(wikitools.__path__, "wikitools."):
        if info.name.endswith(".__main__"):
            continue
        try:
            yield importlib.import_module(info.name)
        except ImportError as exc:  # an optional extra (ray) that this environment lacks
            if exc.name and exc.name.split(".")[0] == "wikitools":
                raise


def _exceptions() -> list[type[BaseException]]:
    found = {}
    for module in _modules():
        for _name, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__.startswith("wikitools"):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


def test_every_expected_error_is_a_wiki_error():
    loose = [e.__qualname__ for e in _exceptions()
             if not issubclass(e, WikiError) and e.__qualname__ not in INTERNAL]
    assert loose == []


@pytest.mark.parametrize(("error", "code"), [
    (UsageError("bad use"), 2),
    (InputError("page.md:1:1: unreadable"), 2),
    (RecordError("runbooks/x/1.json: not JSON"), 2),
    (ResultError("result file r.json was not written"), 2),
    (ShellSyntaxError("unclosed single quote at offset 4"), 2),
    (CheckFailed("drift"), 1),
])
def test_each_error_maps_to_its_exit_code(monkeypatch, capsys, error, code):
    def handler(_args):
        raise error

    def parser(only=None):
        p = cli.ArgumentParser(prog="wiki")
        p.set_defaults(handler=handler)
        return p

    monkeypatch.setattr(cli, "build_parser", parser)
    assert cli.main([]) == code
    err = capsys.readouterr().err
    assert err == f"wiki: error: {error}\n"
    assert "Traceback" not in err


def test_all_wiki_errors_have_an_exit_code():
    for e in _exceptions():
        if issubclass(e, WikiError):
            assert e.exit_code in (1, 2, 3), e
