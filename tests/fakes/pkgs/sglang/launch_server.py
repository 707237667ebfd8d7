"""`python -m sglang.launch_server --model-path M --served-model-name N --port P …` → the fake
server with SGLang's endpoints and log lines."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "fake_openai_server.py"

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--model-path", required=True)
    p.add_argument("--served-model-name")
    p.add_argument("--port", type=int, default=30000)
    args, _rest = p.parse_known_args()
    extra = os.environ.get("FAKE_SERVER_ARGS", "").split()
    os.execv(sys.executable, [sys.executable, str(SERVER), "--flavour", "sglang", "--port",
                              str(args.port), "--model", args.served_model_name or args.model_path,
                              *extra])
