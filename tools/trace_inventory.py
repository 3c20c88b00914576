"""Writes inventories that carry a trace (`trainmem.trace_activations`) for
the Rust suite (tests/traced_activations.rs): the timm-like CNN of the Python
tests and a 2-layer llama, each traced on the meta device with its micro-batch.

    PYTHONPATH=python:python/tests python tools/trace_inventory.py

The files go to tests/fixtures/inventory/; the Rust tests check the engine
prices exactly the trace's bytes and replays its blocks, without Python.
"""

import json
import pathlib

import torch

import trainmem
from models import TinyResNet, transformers_model

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "inventory"


def write(name, module, inputs, loss_fn=None):
    trace = trainmem.trace_activations(module, inputs, loss_fn)
    inventory = trainmem.from_module(module)
    inventory.activations_trace = trace.schedule()
    document = inventory.to_dict()
    document["source"] = f"{type(module).__name__} traced by tools/trace_inventory.py"
    path = OUT / f"{name}.inventory.json"
    path.write_text(json.dumps(document, indent=1) + "\n")
    print(path.name, trace)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    write(
        "tiny_resnet_b2",
        TinyResNet().train(),
        torch.randn(2, 3, 32, 32),
        lambda output: output.float().pow(2).mean(),
    )
    ids = torch.zeros(2, 64, dtype=torch.long)
    write(
        "llama_2l_b2s64",
        transformers_model("llama", attn="sdpa"),
        {"input_ids": ids, "labels": ids, "use_cache": False},
    )


if __name__ == "__main__":
    main()
