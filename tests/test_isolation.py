"""The reference runs in a process where candidate code never ran.

A probe task appends, from inside the reference worker (on its first calls:
the correctness trials), its pid, parent pid, whether torch.relu / F.relu /
torch.allclose still behave, and which candidate modules are loaded. A
candidate records its own pid at import and rebinds those torch functions. The records show three different processes (controller,
reference worker, candidate worker) and a reference untouched by the patching.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from cudal1_helpers import write_candidate, write_task

PROBE_TASK = '''\
import json
import os
import sys

import torch
import torch.nn as nn

PROBE = {probe!r}
CALLS = [0]


class Model(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 6:  # the correctness trials are the first calls; keep timed calls as cheap as a ReLU
            return torch.relu(x)
        t = torch.tensor([-1.0, 2.0])
        record = {{
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "relu_ok": torch.relu(t).tolist() == [0.0, 2.0],
            "functional_relu_ok": torch.nn.functional.relu(t).tolist() == [0.0, 2.0],
            "allclose_ok": not torch.allclose(torch.zeros(1), torch.ones(1)),
            "candidate_modules": sorted(m for m in sys.modules if m.startswith("cudal1_candidate")),
            "candidate_marker": hasattr(torch, "_patched_by_candidate"),
        }}
        with open(PROBE, "a") as f:
            f.write(json.dumps(record) + "\\n")
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''

PATCHER = '''\
"""Rebinds torch functions at import so that its identity 'ReLU' would look right to a shared process."""
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

with open({probe!r}, "a") as f:
    f.write(json.dumps({{"pid": os.getpid(), "ppid": os.getppid()}}) + "\\n")

torch.relu = lambda x: x
F.relu = lambda x, inplace=False: x
torch.allclose = lambda *args, **kwargs: True
torch._patched_by_candidate = True


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)  # the patched identity
'''

HONEST = '''\
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.nn.functional.relu(x)
'''


def read_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_reference_process_never_runs_candidate_code(judge_run, pytester: pytest.Pytester) -> None:
    ref_probe, cand_probe = pytester.path / "reference.jsonl", pytester.path / "candidate.jsonl"
    tasks, cands = pytester.path / "tasks", pytester.path / "cands"
    write_task(tasks, 1, "1_probe", PROBE_TASK.format(probe=str(ref_probe)))
    write_candidate(cands, 1, "1_probe", "patcher", PATCHER.format(probe=str(cand_probe)))
    write_candidate(cands, 1, "1_probe", "z_honest", HONEST)  # judged after the patcher

    result, records = judge_run(f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}", "-p", "no:randomly")

    verdicts = {r["candidate_name"]: r["verdict"]["reason"] for r in records}
    # the patched identity is caught, whether by the values or by the tamper check
    assert verdicts["patcher"] in ("WRONG_OUTPUT", "JUDGE_TAMPERING"), records
    assert verdicts["z_honest"] == "OK", records
    result.assert_outcomes(passed=1, failed=1)

    ref = read_lines(ref_probe)
    cand = read_lines(cand_probe)
    assert ref and cand, "the probes did not run"
    # the reference saw true torch functions and no candidate module, on every call
    assert all(r["relu_ok"] and r["functional_relu_ok"] and r["allclose_ok"] for r in ref), ref[:3]
    assert all(r["candidate_modules"] == [] and not r["candidate_marker"] for r in ref)
    if verdicts["patcher"] == "WRONG_OUTPUT":
        rec = next(r for r in records if r["candidate_name"] == "patcher")
        ev = rec["verdict"]["evidence"]
        assert ev["expected"] == 0.0 and ev["got"] < 0  # judged against a real ReLU

    ref_pids = {r["pid"] for r in ref}
    cand_pids = {c["pid"] for c in cand}
    controllers = {r["ppid"] for r in ref} | {c["ppid"] for c in cand}
    assert len(controllers) == 1, "reference and candidate workers are children of the same controller"
    (controller,) = controllers
    assert ref_pids.isdisjoint(cand_pids)
    assert controller not in ref_pids | cand_pids
    assert controller != os.getpid()  # the judged run is a separate pytest process
    assert os.getpid() not in ref_pids | cand_pids
    # the controller itself never imported the candidate (its pid never wrote a probe line)
    assert all(c["pid"] != controller for c in cand)


def test_reference_outputs_are_not_visible_to_the_candidate(judge_run, pytester: pytest.Pytester) -> None:
    """A candidate that looks for the reference in its own process finds nothing to copy."""
    probe = pytester.path / "seen.json"
    tasks, cands = pytester.path / "tasks", pytester.path / "cands"
    write_task(tasks, 1, "1_relu")
    write_candidate(cands, 1, "1_relu", "snoop", f'''\
import json
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        found = sorted(name for name in sys.modules if "reference" in name and "cudal1" in name)
        task_models = [name for name, mod in list(sys.modules.items())
                       if callable(getattr(mod, "__dict__", {{}}).get("get_init_inputs"))]
        with open({str(probe)!r}, "w") as f:
            json.dump({{"reference_modules": found, "task_modules": task_models}}, f)
        return torch.relu(x)
''')
    result, records = judge_run(f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}")
    assert [r["verdict"]["reason"] for r in records] == ["OK"]
    seen = json.loads(probe.read_text())
    assert seen == {"reference_modules": [], "task_modules": []}


ESCAPE = '''\
"""At import, double-forks a process into a new session that outlives the candidate worker."""
import os
import time

import torch
import torch.nn as nn

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open({pidfile!r}, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(120)
    os._exit(0)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''


def _alive_escapee(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"pytest_cudal1.workers.candidate" in cmdline and b"Z" not in Path(f"/proc/{pid}/stat").read_bytes().split(b")")[1][:3]


def test_no_candidate_process_outlives_its_judging(judge_run, pytester: pytest.Pytester) -> None:
    pidfile = pytester.path / "escaped.pid"
    tasks, cands = pytester.path / "tasks", pytester.path / "cands"
    write_task(tasks, 1, "1_relu")
    write_candidate(cands, 1, "1_relu", "escape", ESCAPE.format(pidfile=str(pidfile)))
    pid = None
    try:
        result, records = judge_run(f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}")
        assert len(records) == 1
        for _ in range(100):
            if pidfile.exists() and pidfile.read_text():
                break
            time.sleep(0.05)
        pid = int(pidfile.read_text())
        assert not _alive_escapee(pid), f"process {pid} started by the candidate is still running"
    finally:
        if pid is not None and _alive_escapee(pid):
            os.kill(pid, signal.SIGKILL)
