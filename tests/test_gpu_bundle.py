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
