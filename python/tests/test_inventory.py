"""trainmem.from_module: the inventory of any nn.Module, equal to
transformers' num_parameters() and to the Rust config path."""

import json

import pytest
import torch
from torch import nn

import trainmem
from models import CONFIGS, TinyResNet, TinyUNetBlock, transformers_model


def config_file(tmp_path, name, **overrides):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(CONFIGS[name], **overrides)))
    return str(path)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("device", [None, "meta"])
def test_counts_equal_transformers_and_the_config_path(tmp_path, name, device):
    model = transformers_model(name, device=device)
    inventory = trainmem.from_module(model)
    rust = trainmem.params(config_file(tmp_path, name))["parameters"]
    assert inventory.total_parameters == model.num_parameters() == rust["total"]
    assert inventory.trainable_parameters == model.num_parameters(only_trainable=True) == rust["trainable"]
    assert trainmem.params(module=model)["parameters"] == rust


@pytest.mark.parametrize("name", ["gpt2", "llama", "qwen2"])
def test_estimate_of_a_module_is_the_config_paths(tmp_path, name):
    model = transformers_model(name, device="meta")
    options = dict(optimizer="adamw", precision="mixed-bf16", micro_batch=2, seq_len=128)
    by_module = trainmem.estimate(module=model, **options)
    by_config = trainmem.estimate(model=config_file(tmp_path, name), **options)
    assert by_module["memory"] == by_config["memory"]
    assert by_module["parameters"] == by_config["parameters"]


def test_ties_are_listed_once_by_object_and_by_storage():
    model = transformers_model("gpt2")
    inventory = trainmem.from_module(model)
    assert inventory.tied == {"transformer.wte.weight": ["lm_head.weight"]}
    assert len(inventory.parameters) == len(list(model.parameters()))

    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Parameter(torch.zeros(4, 8))
            self.b = nn.Parameter(self.a.data)  # another object, the same storage
            self.c = nn.Parameter(self.a.data[1:])  # a slice: other memory counted apart
    shared = trainmem.from_module(Shared())
    assert shared.tied == {"a": ["b"]}
    assert shared.total_parameters == 32 + 24


def test_buffers_are_reported_apart():
    model = TinyResNet()
    inventory = trainmem.from_module(model)
    assert inventory.total_parameters == sum(p.numel() for p in model.parameters())
    assert {b.name for b in inventory.buffers} == {name for name, _ in model.named_buffers()}
    report = trainmem.estimate(module=model)
    assert report["parameters"]["total"] == inventory.total_parameters
    assert any("registered buffers" in note for note in report["model"].get("notes", []) + report["notes"])


@pytest.mark.parametrize("build", [TinyResNet, TinyUNetBlock])
def test_models_the_rules_do_not_know(build):
    model = build()
    inventory = trainmem.from_module(model)
    assert inventory.total_parameters == sum(p.numel() for p in model.parameters())
    report = trainmem.estimate(module=model, optimizer="adamw", precision="fp32")
    total = inventory.total_parameters
    # fp32 AdamW: weights, gradients and two states of 4 bytes each.
    assert report["memory"]["weights"] == 4 * total
    assert report["memory"]["gradients"] == 4 * total
    assert report["memory"]["optimizer_states"] == 8 * total


def test_meta_and_live_inventories_agree():
    with torch.device("meta"):
        meta = TinyUNetBlock()
    live = TinyUNetBlock()
    assert trainmem.from_module(meta).to_dict() == trainmem.from_module(live).to_dict()


def test_frozen_tensors_and_dtypes_are_kept():
    model = TinyResNet().to(torch.bfloat16)
    model.stem.requires_grad_(False)
    inventory = trainmem.from_module(model)
    frozen = sum(p.numel() for p in model.stem.parameters())
    assert inventory.trainable_parameters == inventory.total_parameters - frozen
    assert {p.dtype for p in inventory.parameters} == {"BF16"}
    report = trainmem.estimate(module=inventory, optimizer="adamw", precision="bf16")
    assert report["parameters"] == {"total": inventory.total_parameters, "trainable": inventory.trainable_parameters}


def test_peft_lora_is_priced_like_the_rust_lora_path(tmp_path):
    peft = pytest.importorskip("peft")
    model = transformers_model("llama")
    lora = peft.get_peft_model(model, peft.LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
    trainable, total = lora.get_nb_trainable_parameters()
    inventory = trainmem.from_module(lora)
    assert (inventory.trainable_parameters, inventory.total_parameters) == (trainable, total)
    options = dict(optimizer="adamw", precision="mixed-bf16", micro_batch=1, seq_len=64)
    by_module = trainmem.estimate(module=lora, **options)
    by_config = trainmem.estimate(model=config_file(tmp_path, "llama"), lora_rank=8, lora_targets="q_proj,v_proj", **options)
    assert by_module["parameters"] == by_config["parameters"]
    assert by_module["memory"] == by_config["memory"]
    assert by_module["lora"] == by_config["lora"] == {"rank": 8, "modules": 4, "dtype": "fp32", "dropout": 0.0}


def test_the_inventory_file_is_a_model_source_for_the_command_line(tmp_path, binary):
    import subprocess

    path = tmp_path / "unet.inventory.json"
    trainmem.from_module(TinyUNetBlock()).save(path)
    done = subprocess.run([binary, "params", str(path), "--format", "json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["parameters"]["total"] == trainmem.from_module(TinyUNetBlock()).total_parameters


def test_not_a_module_is_an_error():
    with pytest.raises(trainmem.Error, match="not an nn.Module"):
        trainmem.from_module(object())
    with pytest.raises(trainmem.Error, match="not both"):
        trainmem.estimate(module=TinyResNet(), model="gpt2")
