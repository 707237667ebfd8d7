"""scripts/gpu-bundle/on-device.sh, the device side of the engine bundles: parts carried one call
at a time accumulate, the bundle is unpacked only once the checksum matches, and the environment
it exports keeps NVLink multicast off."""

from __future__ import annotations

import hashlib
import io
import lzma
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from harness import load_script

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "gpu-bundle" / "on-device.sh"


def bundle(engine: str) -> tuple[list[bytes], str]:
    """An xz tarball holding a package named `engine`, split in two parts, and its sha256."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        data = b'__version__ = "1.2.3"\n'
        info = tarfile.TarInfo(f"./{engine}/__init__.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    packed = lzma.compress(raw.getvalue())
    half = len(packed) // 2
    return [packed[:half], packed[half:]], hashlib.sha256(packed).hexdigest()


def carry(root: Path, engine: str, parts: list[tuple[int, bytes]], sha: str) -> None:
    """Lay out what one device call carries: some parts, the checksum and the script."""
    dest = root / f".gpu-{engine}"
    shutil.rmtree(dest, ignore_errors=True)
    for i, part in parts:
        (dest / f"p{i + 1}").mkdir(parents=True)
        (dest / f"p{i + 1}" / f"part.{i:02d}").write_bytes(part)
    dest.mkdir(exist_ok=True)
    (dest / "sha256").write_text(sha + "\n")
    shutil.copy(SCRIPT, dest / "on-device.sh")


def source(root: Path, engine: str) -> str:
    probe = (f". .gpu-{engine}/on-device.sh; echo PYTHONPATH=$PYTHONPATH; "
             "echo NVLS=$NCCL_NVLS_ENABLE $TORCH_SYMM_MEM_DISABLE_MULTICAST "
             "$NVSHMEM_DISABLE_NVLS $VLLM_FLASHINFER_ALLREDUCE_BACKEND")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["NCCL_NVLS_ENABLE"] = "1"
    return subprocess.run(["bash", "-c", probe], cwd=root, env=env, capture_output=True,
                          text=True, timeout=60, check=True).stdout


@pytest.fixture
def engine():
    name = f"wikibundletest{os.getpid()}"
    yield name
    shutil.rmtree(f"/tmp/gpu-{name}-parts", ignore_errors=True)
    shutil.rmtree(f"/tmp/{name}-site", ignore_errors=True)


def test_parts_accumulate_then_unpack(tmp_path: Path, engine: str) -> None:
    parts, sha = bundle(engine)
    carry(tmp_path, engine, [(0, parts[0])], sha)
    first = source(tmp_path, engine)
    assert "parts so far: part.00" in first and "carry the next part" in first
    assert not Path(f"/tmp/{engine}-site/.ready").exists()
    carry(tmp_path, engine, [(1, parts[1])], sha)
    second = source(tmp_path, engine)
    assert f"gpu-{engine}: ready - {engine} 1.2.3" in second
    assert f"PYTHONPATH=/tmp/{engine}-site\n" in second
    assert "NVLS=0 1 1 trtllm" in second
    # A later call on the same machine needs no part at all.
    carry(tmp_path, engine, [], sha)
    assert f"ready - {engine} 1.2.3" in source(tmp_path, engine)


def test_a_wrong_checksum_never_unpacks(tmp_path: Path, engine: str) -> None:
    parts, _sha = bundle(engine)
    carry(tmp_path, engine, list(enumerate(parts)), "0" * 64)
    out = source(tmp_path, engine)
    assert "carry the next part" in out
    assert "NVLS=0 1 1 trtllm" in out  # set before anything else, even when nothing runs
    assert not Path(f"/tmp/{engine}-site").exists()


# What a runbook run imports, in a fresh interpreter: the CLI and every command module.
RUN_IMPORTS = """
import importlib, json, pkgutil, sys
import wikitools.cli, wikitools.cli.common
for m in pkgutil.iter_modules(wikitools.cli.__path__):
    importlib.import_module("wikitools.cli." + m.name)
print(json.dumps(sorted({n.split(".")[0] for n in sys.modules})))
"""


# Imported when present, needed by nothing a run does.
OPTIONAL = {
    "click": "httpx imports it for its own command line when it is installed",
    "setuptools": "its _distutils_hack, loaded by a .pth file at interpreter start-up",
}


def _closure(names: set[str]) -> set[str]:
    """The distributions `names` need, with what they need in turn (as installed here)."""
    import importlib.metadata as md
    import re

    seen: set[str] = set()
    todo = [n.lower().replace("_", "-") for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        todo += [re.split(r"[^\w.-]", r, maxsplit=1)[0].lower().replace("_", "-")
                 for r in reqs if "extra ==" not in r]
    return seen


def test_the_bundle_carries_every_dependency_a_runbook_run_imports() -> None:
    import importlib.metadata as md
    import json
    import sys

    wiki_deps = load_script(REPO / "scripts/gpu-bundle/wiki-deps.py", "wiki_deps")
    carried = _closure({wiki_deps.requirement_name(r)
                        for r in wiki_deps.runtime_requirements(REPO / "pyproject.toml")})
    assert "markdown-it-pyrs" in carried
    out = subprocess.run([sys.executable, "-c", RUN_IMPORTS], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    owners = md.packages_distributions()
    imported = {d.lower().replace("_", "-") for top in json.loads(out)
                if top not in sys.stdlib_module_names and top != "wikitools"
                for d in owners.get(top, [])}
    assert imported, "no third-party import seen"
    assert imported - OPTIONAL.keys() <= carried | {"wikitools"}, sorted(imported - carried)
