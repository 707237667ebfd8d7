"""scripts/make-dummy-model.py --full-vocab: every token id the model can produce decodes to text,
and the files are the same on every run. Runs the script with the engine environment's Python
(which has `tokenizers`)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENGINE_PY = Path(os.environ.get("WIKI_ENGINE_VENV", REPO / ".venv-engine")) / "bin" / "python"
SCRIPT = REPO / "scripts" / "make-dummy-model.py"

pytestmark = pytest.mark.skipif(
    not ENGINE_PY.is_file(), reason=f"engine environment missing ({ENGINE_PY.parent.parent})")


def make(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ENGINE_PY), str(SCRIPT), str(path), *args],
                          capture_output=True, text=True, timeout=300)


def test_full_vocab_tokenizer_covers_the_model(tmp_path: Path) -> None:
    model = tmp_path / "m"
    assert make(model, "--full-vocab").returncode == 0
    config = json.loads((model / "config.json").read_text())
    assert config["vocab_size"] == 128256
    probe = (
        "import sys\n"
        "from tokenizers import Tokenizer\n"
        f"t = Tokenizer.from_file({str(model / 'tokenizer.json')!r})\n"
        "ids = list(range(0, 128256, 97)) + [511, 512, 128255]\n"
        "empty = [i for i in ids if not t.decode([i], skip_special_tokens=False)]\n"
        "text = t.decode(list(range(600, 1112)))\n"
        "print(t.get_vocab_size(), len(empty), len(t.encode(text).ids))\n"
    )
    out = subprocess.run([str(ENGINE_PY), "-c", probe], capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    assert out == ["128256", "0", "512"]
    # Same bytes on a second run; without the flag the small tokenizer comes back.
    assert make(model, "--full-vocab", "--check").returncode == 0
    changed = make(model, "--check")
    assert changed.returncode == 1 and "tokenizer.json: would change" in changed.stdout
