"""trainmem.trace_activations: what autograd saves, traced on the meta
device, against the same count measured for real on CPU, the measured
fixtures, and the Rust rule (`--platform cpu`)."""

import json
from collections import Counter

import pytest
import torch

import trainmem
from models import CONFIGS, TinyResNet, TinyUNetBlock, transformers_model

# (architecture, dtype, attention, batch, sequence): each has a fixture
# measured by tools/measure_activations.py with the same config.
FIXTURED = [
    ("gpt2", "fp32", "eager", 2, 64),
    ("gpt2", "fp32", "sdpa", 2, 64),
    ("gpt2", "bf16", "eager", 2, 64),
    ("llama", "fp32", "eager", 2, 64),
    ("llama", "fp32", "sdpa", 1, 16),
    ("llama", "bf16", "sdpa", 2, 64),
]


def language_inputs(batch, seq):
    torch.manual_seed(0)
    ids = torch.randint(0, 1000, (batch, seq))
    # use_cache=False as transformers.Trainer runs (and the fixtures measure).
    return {"input_ids": ids, "labels": ids, "use_cache": False}


def entries(trace):
    return Counter((s.bytes, s.dtype, s.shape, s.module) for s in trace.saved)


@pytest.mark.parametrize("name,dtype,attn,batch,seq", FIXTURED)
def test_the_meta_trace_is_the_cpu_measurement_and_the_rule(fixtures, name, dtype, attn, batch, seq):
    model = transformers_model(name, attn=attn).to({"fp32": torch.float32, "bf16": torch.bfloat16}[dtype])
    inputs = language_inputs(batch, seq)
    meta = trainmem.trace_activations(model, inputs)
    real = trainmem.trace_activations(model, inputs, device=None)
    fixture = json.loads((fixtures / "activations" / f"{name}__base__{dtype}__{attn}__b{batch}s{seq}.json").read_text())
    assert fixture["config"] == CONFIGS[name]
    assert (real.total_bytes, real.saved_bytes) == (fixture["total_bytes"], fixture["saved_bytes"])

    def rule(platform):
        return trainmem.estimate(
            module=model, micro_batch=batch, seq_len=seq, platform=platform, attention=attn, precision=dtype
        )["memory"]["activations"]

    assert rule("cpu") == real.total_bytes
    if name == "gpt2" and dtype == "bf16":
        # LayerNorm of bf16 input keeps its mean and rstd in bf16 on CPU and
        # in fp32 on the meta device, as on CUDA (and the cuda rule).
        only_meta, only_real = entries(meta) - entries(real), entries(real) - entries(meta)
        assert {(b, d, s[-1]) for b, d, s, _ in only_meta} == {(batch * seq * 4, "float32", 1)}
        assert {(b, d, s[-1]) for b, d, s, _ in only_real} == {(batch * seq * 2, "bfloat16", 1)}
        assert all(".ln_" in m or m.endswith("ln_f") for _, _, _, m in only_meta)
        assert meta.total_bytes == rule("cuda") != rule("cpu")
    else:
        assert meta.to_dict() == real.to_dict()


def test_a_meta_model_traces_without_memory():
    model = transformers_model("llama", device="meta", attn="sdpa")
    trace = trainmem.trace_activations(model, language_inputs(1, 16))
    assert trace.total_bytes > 0
    assert all(p.device.type == "meta" for p in model.parameters())
    assert trace.order[0] == "model" and "lm_head" in trace.order


def cnn_inputs():
    torch.manual_seed(0)
    return torch.randn(2, 3, 32, 32)


def unet_inputs():
    torch.manual_seed(0)
    return (torch.randn(2, 4, 16, 16), torch.randn(2, 16))


@pytest.mark.parametrize(
    "build,inputs",
    [(TinyResNet, cnn_inputs), (TinyUNetBlock, unet_inputs)],
    ids=["cnn", "unet"],
)
def test_models_the_rules_do_not_cover(build, inputs):
    model = build().train()
    loss = lambda output: output.float().pow(2).mean()
    meta = trainmem.trace_activations(model, inputs(), loss)
    real = trainmem.trace_activations(model, inputs(), loss, device=None)
    assert meta.to_dict() == real.to_dict()
    assert meta.saved_bytes > 0
    # Every parameter-holding child that runs appears in the breakdown.
    assert set(meta.by_module) <= {name for name, _ in model.named_modules()}


def test_the_cnn_trace_counts_what_autograd_keeps():
    """The first conv keeps its fp32 input image: 2 x 3 x 32 x 32 x 4 bytes."""
    trace = trainmem.trace_activations(TinyResNet().train(), cnn_inputs())
    first = [s for s in trace.saved if s.module == "stem.0"]
    assert [s.bytes for s in first] == [2 * 3 * 32 * 32 * 4]
    assert trace.by_module["stem.0"] == 2 * 3 * 32 * 32 * 4


def test_parameters_are_not_counted_and_the_module_is_unchanged():
    model = torch.nn.Linear(8, 4)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trace = trainmem.trace_activations(model, torch.randn(3, 8, requires_grad=True))
    # addmm saves its input (3 x 8 fp32), not the weight.
    assert trace.saved_bytes == 3 * 8 * 4
    assert trace.output_bytes == 3 * 4 * 4
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert model.weight.device.type == "cpu"


def test_data_dependent_forwards_are_refused_on_meta():
    class Picky(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x[: int(x.sum().item() > 0) + 1])

    with pytest.raises(trainmem.Error, match="meta device"):
        trainmem.trace_activations(Picky(), torch.randn(2, 4))
