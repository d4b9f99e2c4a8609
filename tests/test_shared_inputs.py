"""The reference worker refills the candidate's timed inputs (``TimingInputs.mirror``, ``workers/arena.py``): the
candidate's process maps them, reads what the reference drew, and sees them laid out as a trial's inputs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from pytest_cudal1.workers import guards
from pytest_cudal1.workers.timing_inputs import TimingInputs

DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU")])]

# What the other process runs: adopt the shared sets, report each set's values and layout, then write into them.
ADOPTER = """
import json, sys, torch
from pytest_cudal1.workers import guards
from pytest_cudal1.workers.timing_inputs import TimingInputs
handles, device = json.loads(sys.stdin.read())
base = [torch.zeros(64, 32, device=device), torch.zeros(100, dtype=torch.int64, device=device), 7]
mine = TimingInputs(base, device)
mine.adopt(handles)
seen = []
for inputs in mine.select(len(mine.sets)):
    x, labels, k = inputs
    seen.append({"sum": float(x.double().sum()), "labels": int(labels.sum()), "k": k,
                 "layout": [x.storage_offset(), x.untyped_storage().nbytes(), x.untyped_storage().resizable(),
                            x.data_ptr() % 512]})
trial = guards.Guarded([torch.ones(64, 32, device=device)]).inputs[0]
seen.append({"trial_layout": [trial.storage_offset(), trial.untyped_storage().nbytes(),
                              trial.untyped_storage().resizable(), trial.data_ptr() % 512]})
mine.sets[0][0].target.fill_(0.0)  # what the candidate writes, the reference sees (and refills over)
if device == "cuda":
    torch.cuda.synchronize()
print(json.dumps(seen))
"""


@pytest.mark.parametrize("device", DEVICES)
def test_the_candidates_process_reads_the_sets_the_reference_refilled(device: str) -> None:
    base = [torch.randn(64, 32, device=device), torch.randint(0, 9, (100,), device=device), 7]
    own = TimingInputs(base, device)
    theirs = own.twin()
    own.fixed(11, 3)
    handles = theirs.mirror(own, 3, 0, 0)
    assert len(handles) == 1 and handles[0]["sets"] == 3
    own.fixed(12, 1, first=1)  # a later refill of one set reaches the other process too; no new handles
    assert theirs.mirror(own, 1, 1, 1) == []
    if device == "cuda":
        torch.cuda.synchronize()
    done = subprocess.run([sys.executable, "-c", ADOPTER], input=json.dumps([handles, device]), text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    *sets, trial = json.loads(done.stdout)
    for seen, inputs in zip(sets, own.select(3)):
        assert seen["sum"] == pytest.approx(float(inputs[0].double().sum()), rel=1e-12)
        assert seen["labels"] == int(inputs[1].sum()) and seen["k"] == 7
        assert seen["layout"] == trial["trial_layout"]  # as a trial's input: nothing tells the phases apart
    assert float(theirs.sets[0][0].target.abs().sum()) == 0.0  # its write landed in the reference's mapping
    assert guards.overrun(theirs.in_use or [s for s in theirs.sets[0] if isinstance(s, guards.Slot)]) is None


def test_an_adopted_set_is_never_refilled_by_the_process_that_adopted_it() -> None:
    """The candidate's worker holds no seed and no refill of its own: ``fixed`` only picks sets there."""
    own = TimingInputs([torch.randn(16)], "cpu")
    theirs = own.twin()
    own.fixed(3, 2)
    adopter = TimingInputs([torch.zeros(16)], "cpu")
    adopter.adopt(theirs.mirror(own, 2, 0, 0))
    before = [x[0].clone() for x in adopter.select(2)]
    after = adopter.fixed(99, 2)
    assert all(torch.equal(a, b[0]) for a, b in zip(before, after))
    with pytest.raises(RuntimeError, match="shared by the reference worker"):
        adopter.select(1, first=2)
