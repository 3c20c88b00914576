"""The trace feeds the same timeline: `trainmem.estimate(module=m,
trace=t, micro_batch=B)` prices the activations `trace_activations` found
(each top-level block kept from its forward to its backward) instead of a
rule's, and says so."""

import json

import pytest
import torch

import trainmem
from models import TinyResNet, transformers_model


def cnn_loss(output):
    return output.float().pow(2).mean()


def test_a_traced_cnn_is_priced_at_the_trace_total():
    model = TinyResNet().train()
    trace = trainmem.trace_activations(model, torch.randn(2, 3, 32, 32), cnn_loss)
    report = trainmem.estimate(module=model, trace=trace, micro_batch=2)
    # Nothing is added to the trace: no rule covers the CNN, and autocast's
    # copies are in a trace when it ran under autocast, not added to it.
    assert report["memory"]["activations"] == trace.total_bytes > 0
    assert any(n.startswith("activations come from a trace") for n in report["notes"])
    assert any(n.startswith("backward temporaries are not known") for n in report["notes"])
    assert not any("activations are not estimated" in n for n in report["notes"])
    # Every byte lands in exactly one place, the blocks in run order.
    schedule = trace.schedule()
    assert [b["name"] for b in schedule["blocks"]] == ["stem", "stage1", "down", "stage2", "head"]
    assert schedule["before_blocks"] + schedule["after_blocks"] + schedule["outputs"] + sum(
        b["bytes"] for b in schedule["blocks"]
    ) == trace.total_bytes
    # The timeline keeps each block's saved bytes in forward, in order.
    timeline = trainmem.timeline(module=model, trace=trace, micro_batch=2)
    kept = [
        e["bytes"]
        for e in timeline["events"]
        if e["phase"] == "forward" and e["tensor"] == "saved activations"
    ]
    assert kept == [b["bytes"] for b in schedule["blocks"] if b["bytes"] > 0]


def test_a_traced_llama_equals_the_rule(tmp_path):
    model = transformers_model("llama", attn="sdpa")
    ids = torch.zeros(2, 64, dtype=torch.long)
    trace = trainmem.trace_activations(model, {"input_ids": ids, "labels": ids, "use_cache": False})
    schedule = trace.schedule()
    assert [b["name"] for b in schedule["blocks"]] == ["model.layers.0", "model.layers.1"]
    model.config.to_json_file(tmp_path / "config.json")
    flags = dict(micro_batch=2, seq_len=64, precision="fp32", platform="cpu", attention="sdpa")
    traced = trainmem.estimate(module=model, trace=trace, **flags)
    rule = trainmem.estimate(model=str(tmp_path / "config.json"), **flags)
    # The same bytes, to the byte: the rule's formulas were fitted to the
    # same saved tensors (CPU kernels, fp32, sdpa).
    assert traced["memory"]["activations"] == rule["memory"]["activations"] == trace.total_bytes
    # The peaks differ by what the rule models and a trace cannot see: the
    # backward's temporaries (the loss's fp32 gradients, each layer's
    # activation gradients), which the trace's note says are not priced.
    assert traced["memory"]["peak"] < rule["memory"]["peak"]


def test_another_micro_batch_is_refused():
    model = TinyResNet().train()
    trace = trainmem.trace_activations(model, torch.randn(2, 3, 32, 32), cnn_loss)
    with pytest.raises(trainmem.Error, match=r"micro-batch of 2.*accepted: --micro-batch 2"):
        trainmem.estimate(module=model, trace=trace, micro_batch=4)
    with pytest.raises(trainmem.Error, match="trace= without module="):
        trainmem.estimate(model="gpt2", trace=trace, micro_batch=2)
    with pytest.raises(trainmem.Error, match="trace= with plan"):
        trainmem.plan(module=model, trace=trace, micro_batch=2)


def test_another_sequence_length_is_refused():
    model = transformers_model("llama", attn="sdpa")
    ids = torch.zeros(2, 16, dtype=torch.long)
    trace = trainmem.trace_activations(model, {"input_ids": ids, "labels": ids, "use_cache": False})
    with pytest.raises(trainmem.Error, match="sequences of 16 tokens"):
        trainmem.estimate(module=model, trace=trace, micro_batch=2, seq_len=32)
    with pytest.raises(trainmem.Error, match="--recompute"):
        trainmem.estimate(module=model, trace=trace, micro_batch=2, seq_len=16, recompute="full")
