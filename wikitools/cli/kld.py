"""`wiki kld capture` and `wiki kld score`: per-position log-probabilities of a fixed token input
from a running server, and the KL divergence of captures from a reference capture."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from wikitools.core.errors import UsageError
from wikitools.core.fsio import write_if_changed
from wikitools.quality import capture as cap
from wikitools.quality import divergence
from wikitools.quality.tokens import TokenInput, from_file, from_seed


def add_parser(sub: Any) -> None:
    p = sub.add_parser("kld", help="capture log-probabilities and score KL divergence",
                       description="KLD receipts through the engine's own API.")
    p.set_defaults(handler=lambda _a: _help(p))
    kld_sub = p.add_subparsers(dest="kld_command", metavar="SUBCOMMAND")

    c = kld_sub.add_parser(
        "capture", help="capture per-position log-probabilities of a fixed token input",
        description="Send a fixed token input to a running server (vLLM's /v1/completions with "
        "prompt_logprobs, or SGLang's /generate) and write the top-k log-probabilities of every "
        "position to a JSON capture. The input is a file of token ids or ids drawn from a seed; "
        "either way the capture names its SHA-256. SGLang is asked twice, the second time from "
        "the middle of the input, so that the second half is computed against keys and values "
        "read back from its KV cache.")
    c.add_argument("--base-url", default="http://127.0.0.1:8000", help="the server")
    c.add_argument("--model", help="served model name (default: the first of /v1/models)")
    c.add_argument("--api", choices=cap.APIS, default="vllm", help="the engine's API")
    c.add_argument("--top-k", type=int, default=20,
                   help="log-probabilities per position; -1: the whole vocabulary (vLLM "
                   "started with --max-logprobs -1)")
    c.add_argument("--tokens", type=Path, metavar="FILE", help="JSON list of token ids")
    c.add_argument("--seed", type=int, help="draw the ids from this seed instead")
    c.add_argument("--positions", type=int, default=512, help="ids drawn from the seed")
    c.add_argument("--id-range", default="3-512", metavar="LO-HI",
                   help="drawn ids lie in [LO, HI) (default 3-512)")
    c.add_argument("--expect-input", metavar="SHA256",
                   help="refuse an input whose hash differs (sha256:<hex> or <hex>)")
    c.add_argument("--out", type=Path, default=Path("kld-capture.json"), help="capture file")
    c.add_argument("--timeout", type=float, default=600.0,
                   help="seconds the server's whole answer may take")
    c.set_defaults(handler=run_capture)

    s = kld_sub.add_parser(
        "score", help="KL divergence of captures from a reference capture",
        description="Mean KLD over positions (averaged over the candidate captures, one per "
        "run), the SD of the runs' means, the SD over positions, and the positions and top-k.")
    s.add_argument("reference", type=Path, help="the reference capture")
    s.add_argument("candidates", type=Path, nargs="+", help="one capture per run")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(handler=run_score)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _tokens(args: argparse.Namespace) -> TokenInput:
    if (args.tokens is None) == (args.seed is None):
        raise UsageError("give the input as --tokens FILE or --seed N (one of them)")
    if args.tokens is not None:
        return from_file(args.tokens)
    m = re.fullmatch(r"(\d+)-(\d+)", args.id_range)
    if not m:
        raise UsageError(f"--id-range {args.id_range!r}: expected LO-HI, e.g. 3-512")
    return from_seed(args.seed, args.positions, int(m[1]), int(m[2]))


def run_capture(args: argparse.Namespace) -> int:
    tokens = _tokens(args)
    if args.expect_input:
        want = args.expect_input if ":" in args.expect_input else "sha256:" + args.expect_input
        if want != tokens.sha256:
            raise UsageError(f"the input hashes to {tokens.sha256}, not {want}")
    model = args.model or cap.served_model(args.base_url, args.timeout)
    result = cap.capture(args.base_url, model, tokens, args.top_k, args.api, args.timeout)
    write_if_changed(args.out, cap.dumps(result))
    k = "all" if result.top_k == -1 else str(result.top_k)
    print(f"{args.out}: {len(result.positions)} positions, top-k {k}, input {tokens.sha256}",
          file=sys.stderr)
    read = result.cache_read
    if read is not None and read["cached_tokens"] > 0:
        print(f"positions from {read['from_position'] + 1} on were computed against "
              f"{read['cached_tokens']} tokens read back from the server's KV cache",
              file=sys.stderr)
    elif read is not None:
        print("warning: the server took no token from its prefix cache (started with "
              "--disable-radix-cache?): this capture never read the KV cache", file=sys.stderr)
    return 0


def run_score(args: argparse.Namespace) -> int:
    ref = cap.load(args.reference)
    runs = [divergence.divergence(ref, cap.load(p)) for p in args.candidates]
    summary = divergence.summarise(runs, ref.top_k)
    data = {**summary.to_dict(), "reference": str(args.reference),
            "reference_sha256": cap.file_hash(args.reference)}
    if args.json:
        print(json.dumps(data, sort_keys=True, indent=2))
        return 0
    sd = "n/a (one run)" if summary.run_sd is None else f"{summary.run_sd:.3g}"
    print(f"mean KLD {summary.mean:.6g} over {summary.positions} positions, {summary.runs} "
          f"run(s); run SD {sd}; position SD {summary.position_sd:.3g}; "
          f"top-k {'all' if summary.top_k == -1 else summary.top_k}; "
          f"reference {data['reference_sha256']}")
    return 0
