#!/usr/bin/env python3
"""Measure the peak GPU memory of real training steps, to compare with trainmem.

For each configuration below: build the model from a config dict with random
weights on CUDA, run a few full training steps (forward with labels,
backward, optimizer step, zero_grad(set_to_none=True)) and record
``torch.cuda.max_memory_allocated()`` after resetting the peak before the last
step. It prints one JSON line per configuration with the matching trainmem
command (`--overhead 0`: the allocator's own peak, no CUDA context), and
writes them to ``tests/fixtures/peak/<id>.json`` when ``--write`` is given.

Run on a machine with an NVIDIA GPU, from the repository root, in a virtual
environment with torch and transformers (nothing is downloaded):

    python tools/measure_peak.py [--write] [--only SUBSTRING]

Recipes measured: ``amp-bf16`` (fp32 weights, torch.autocast to bf16,
fp32 AdamW states) and ``bf16`` (pure bf16 weights and states), with sdpa
attention and use_cache=False, as the transformers Trainer trains.
"""

import argparse
import json
import os
import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "peak")

LLAMA_SMALL = {
    "model_type": "llama", "hidden_size": 1024, "intermediate_size": 2816,
    "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4,
    "vocab_size": 32000, "max_position_embeddings": 4096,
}
GPT2_SMALL = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257}

CONFIGS = [
    (f"{name}__{recipe}__b{b}s{s}", config, recipe, b, s)
    for name, config in (("llama_small", LLAMA_SMALL), ("gpt2_small", GPT2_SMALL))
    for recipe in ("amp-bf16", "bf16")
    for b, s in ((1, 512), (4, 1024), (8, 2048))
]


def measure(config, recipe, batch, seq_len, steps=3):
    cfg = AutoConfig.for_model(**config)
    cfg.use_cache = False
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").cuda()
    if recipe == "bf16":
        model = model.to(torch.bfloat16)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq_len), device="cuda")
    for step in range(steps):
        if step == steps - 1:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=recipe == "amp-bf16"):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    params = sum(p.numel() for p in model.parameters())
    del model, optimizer
    torch.cuda.empty_cache()
    return peak, params


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device: this script measures GPU peaks")
    os.makedirs(FIXTURES, exist_ok=True)
    for ident, config, recipe, batch, seq_len in CONFIGS:
        if args.only not in ident:
            continue
        peak, params = measure(config, recipe, batch, seq_len)
        record = {
            "id": ident, "config": config, "precision": recipe, "optimizer": "adamw",
            "micro_batch": batch, "seq_len": seq_len, "parameters": params,
            "max_memory_allocated": peak, "device": torch.cuda.get_device_name(),
            "torch_version": torch.__version__,
            "trainmem": f"trainmem estimate --model CONFIG.json --optimizer adamw --precision {recipe} "
                        f"--micro-batch {batch} --seq-len {seq_len} --overhead 0 --format json",
        }
        print(json.dumps(record))
        if args.write:
            with open(os.path.join(FIXTURES, f"{ident}.json"), "w") as f:
                json.dump(record, f, indent=2)
                f.write("\n")


if __name__ == "__main__":
    main()
