"""trainmem.torch.MemoryCheck: on a machine without CUDA it measures
nothing and says so, in the printout and in the JSON report."""

import json

import pytest
import torch

import trainmem
import trainmem.torch
from models import TinyResNet

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU behaviour; a GPU measures")


def train(model, steps, check):
    optimizer = torch.optim.AdamW(model.parameters())
    for _ in range(steps):
        loss = model(torch.randn(2, 3, 32, 32)).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if not check.step():
            break


def test_without_cuda_the_report_says_so(tmp_path, capsys):
    model = TinyResNet()
    prediction = trainmem.estimate(module=model, optimizer="adamw", precision="fp32")
    path = tmp_path / "check.json"
    with trainmem.torch.MemoryCheck(prediction, steps=2, report=str(path)) as check:
        train(model, 5, check)
    printed = capsys.readouterr().out
    assert "no CUDA device" in printed and str(path) in printed
    report = json.loads(path.read_text())
    assert report["status"].startswith("no CUDA device")
    assert report["device"] == {"cuda": False, "name": None, "total_memory": None}
    assert report["measured"] is None
    assert report["steps_recorded"] == 2
    assert report["predicted"] == prediction["memory"]
    assert all(row["measured"] is None for row in report["comparison"])
    assert report["versions"]["torch"] == torch.__version__


def test_a_trainer_callback(tmp_path):
    transformers = pytest.importorskip("transformers")
    check = trainmem.torch.MemoryCheck(steps=1, report=str(tmp_path / "r.json"), quiet=True)
    assert isinstance(check, transformers.TrainerCallback)
    check.on_train_begin(None, None, None)
    check.on_step_end(None, None, None)
    assert check.finished and check.report["steps_recorded"] == 1
    check.on_train_end(None, None, None)  # finishing twice writes once
    assert json.loads((tmp_path / "r.json").read_text())["status"].startswith("no CUDA device")


def test_estimate_keywords_make_the_prediction(tmp_path):
    check = trainmem.torch.MemoryCheck(estimate=dict(model="gpt2"), report=None, quiet=True)
    check.step()
    assert check.finish()["predicted"] == trainmem.estimate(model="gpt2")["memory"]
    with pytest.raises(trainmem.Error, match="steps `0`"):
        trainmem.torch.MemoryCheck(steps=0)


def test_inside_a_real_trainer(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from models import transformers_model

    model = transformers_model("gpt2")
    ids = torch.randint(0, 1000, (8, 16))
    data = [{"input_ids": row, "labels": row} for row in ids]
    check = trainmem.torch.MemoryCheck(
        estimate=dict(module=model, micro_batch=2, seq_len=16), steps=2, report=str(tmp_path / "r.json"), quiet=True
    )
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=2, max_steps=3,
        report_to=[], save_strategy="no", use_cpu=True, logging_strategy="no",
    )
    transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=[check]).train()
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["steps_recorded"] == 2 and report["status"].startswith("no CUDA device")
