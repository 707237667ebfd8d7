"""Write a dummy-weight model folder (config.json + a tokenizer trained on the spot) with the
architecture of a well-known dense model, for `vllm serve DIR --load-format dummy`.

    python scripts/make-dummy-model.py DIR [--preset llama-3.2-1b]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

# Shapes as published in each model's config.json; weights are never downloaded.
PRESETS: dict[str, dict[str, object]] = {
    "llama-3.2-1b": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rms_norm_eps": 1e-05,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
    },
}

_CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _corpus() -> list[str]:
    words = [
        "the", "model", "runs", "on", "the", "card", "with", "memory", "and", "cache", "for",
        "tokens", "per", "second", "while", "the", "server", "answers", "requests", "from",
        "many", "clients", "across", "layers", "heads", "experts", "and", "batches",
    ]
    return [" ".join(words[(i * 7 + j) % len(words)] for j in range(40)) for i in range(400)]


def write_model(dest: Path, preset: str) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    dest.mkdir(parents=True, exist_ok=True)
    config = dict(PRESETS[preset], bos_token_id=1, eos_token_id=2, pad_token_id=0)
    (dest / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000,
        special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_corpus(), trainer)
    tok.save(str(dest / "tokenizer.json"))
    tok_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "<pad>",
        "model_max_length": 131072,
        "chat_template": _CHAT_TEMPLATE,
    }
    (dest / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2) + "\n")
    gen = {"bos_token_id": 1, "eos_token_id": 2, "do_sample": False}
    (dest / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--preset", default="llama-3.2-1b", choices=sorted(PRESETS))
    args = parser.parse_args()
    write_model(args.dest, args.preset)


if __name__ == "__main__":
    main()
