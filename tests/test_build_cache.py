"""C++ (load_inline) candidates build once per source hash and are reused by later runs.

The one test module that compiles (about 30 s); it shares the session cache
directory so a build is paid once. Deselect with ``-m "not slow"``.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cudal1_helpers import FAST, read_ledger, run_pytest, write_candidate, write_task

pytestmark = pytest.mark.slow

CPP_RELU = '''\
"""ReLU as a C++ loop in a load_inline CPU extension."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
torch::Tensor relu_forward(torch::Tensor x) {
    auto in = x.contiguous();
    auto out = torch::empty_like(in);
    const float* src = in.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    for (int64_t i = 0; i < in.numel(); ++i) dst[i] = src[i] > 0.0f ? src[i] : 0.0f;
    return out;
}
"""

_ext = load_inline(name="cudal1_tests_tiny_relu", cpp_sources=_SOURCE, functions=["relu_forward"],
                   extra_cflags=["-O1"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.relu_forward(x)
'''


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory, session_cache: Path) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("build-cache")
    tasks, cands = where / "tasks", where / "cands"
    write_task(tasks, 1, "1_relu")
    cand = write_candidate(cands, 1, "1_relu", "cpp_relu", CPP_RELU)
    sha = hashlib.sha256(cand.read_text().encode()).hexdigest()
    ledger = where / "ledger.jsonl"
    args = (*FAST, "--cudal1-call-timeout=60", f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}",
            f"--cudal1-cache-dir={session_cache}", f"--cudal1-ledger={ledger}")
    build = session_cache / "builds" / sha
    first = run_pytest(where, *args, timeout=550)
    stamp = {p: p.stat().st_mtime_ns for p in build.rglob("*") if p.is_file()} if build.exists() else {}
    second = run_pytest(where, *args, timeout=300)
    records = read_ledger(ledger)
    return {"first": first, "second": second, "records": records, "sha": sha, "build": build, "stamp": stamp}


def test_first_run_builds_and_leaves_ok_json(two_runs) -> None:
    first = two_runs["first"]
    assert first.ret == 0, "\n".join(first.outlines[-40:])
    rec = two_runs["records"][0]
    assert rec["backend"] == "cpp" and rec["verdict"]["reason"] == "OK"
    assert rec["candidate_sha256"] == two_runs["sha"]
    build = two_runs["build"]
    assert (build / "ok.json").is_file()
    assert list((build / "torch_extensions").rglob("*.so")), "the extension was built in the candidate's cache folder"
    assert rec["compile_s"] > 1.0  # a real C++ compile


def test_second_run_reuses_the_build(two_runs) -> None:
    second = two_runs["second"]
    assert second.ret == 0, "\n".join(second.outlines[-40:])
    first_rec, second_rec = two_runs["records"]
    assert second_rec["verdict"]["reason"] == "OK" and second_rec["candidate_sha256"] == two_runs["sha"]
    # nothing in the build folder was rewritten: no recompilation, same ok.json
    stamp = two_runs["stamp"]
    assert stamp
    changed = [p for p, t in stamp.items() if p.exists() and p.stat().st_mtime_ns != t and p.suffix in (".so", ".o", ".json")]
    assert changed == []
    # and the second run did not pay for a compile
    assert second.duration < two_runs["first"].duration - 0.5 * first_rec["compile_s"]


def test_second_run_reports_the_build_as_cached(two_runs) -> None:
    first_rec, second_rec = two_runs["records"]
    assert second_rec["compile_s"] < 0.25 * first_rec["compile_s"]


KILLED_MID_BUILD = """
import os, sys
from pytest_cudal1.workers import build_locks
build_locks.install()
from torch.utils.file_baton import FileBaton
os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)
assert FileBaton(sys.argv[1]).try_acquire()
os._exit(9)  # dies holding the lock, as a worker killed during its compile does
"""


def test_a_build_lock_left_by_a_killed_process_does_not_block_the_next_build(tmp_path: Path) -> None:
    tasks, cands, cache = tmp_path / "tasks", tmp_path / "cands", tmp_path / "cache"
    write_task(tasks, 1, "1_relu")
    cand = write_candidate(cands, 1, "1_relu", "cpp_relu", CPP_RELU)
    sha = hashlib.sha256(cand.read_text().encode()).hexdigest()
    lock = cache / "builds" / sha / "torch_extensions" / "cudal1_tests_tiny_relu" / "lock"
    subprocess.run([sys.executable, "-c", KILLED_MID_BUILD, str(lock)], timeout=120)
    assert lock.is_file()
    ledger = tmp_path / "ledger.jsonl"
    run = run_pytest(tmp_path, *FAST, "--cudal1-call-timeout=60", "--cudal1-compile-timeout=240",
                     f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}", f"--cudal1-cache-dir={cache}",
                     f"--cudal1-ledger={ledger}", timeout=550)
    assert run.ret == 0, "\n".join(run.outlines[-40:])
    (rec,) = read_ledger(ledger)
    assert rec["verdict"]["reason"] == "OK" and rec["compile_s"] > 1.0  # built, not waited out


CPP_FALLBACK = '''\
"""A load_inline build that fails, caught, with a PyTorch fallback (as most of CUDA-L1's releases do)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = None
for _attempt in range(2):  # a retry, as some of CUDA-L1's do: one note, two attempts
    try:
        _ext = load_inline(name="cudal1_tests_broken_relu", cpp_sources="torch::Tensor f(torch::Tensor x);",
                           functions=["relu_forward"], verbose=False)  # relu_forward is never declared
    except Exception:
        pass


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.relu_forward(x) if _ext is not None else torch.relu(x)
'''


def test_an_extension_that_fails_to_build_is_noted_while_its_fallback_is_judged(tmp_path: Path,
                                                                                session_cache: Path) -> None:
    tasks, cands = tmp_path / "tasks", tmp_path / "cands"
    write_task(tasks, 1, "1_relu")
    write_candidate(cands, 1, "1_relu", "fallback", CPP_FALLBACK)
    ledger = tmp_path / "ledger.jsonl"
    run = run_pytest(tmp_path, *FAST, "--cudal1-call-timeout=60", "-rA", f"--cudal1-tasks={tasks}",
                     f"--cudal1-candidates={cands}", f"--cudal1-cache-dir={session_cache}",
                     f"--cudal1-ledger={ledger}", f"--cudal1-html={tmp_path / 'report.html'}", timeout=550)
    assert run.ret == 0, "\n".join(run.outlines[-40:])
    (rec,) = read_ledger(ledger)
    assert rec["verdict"]["reason"] == "OK"  # the fallback is what runs, and it is honest
    (failure,) = rec["extension_failures"]
    assert failure["extension"] == "cudal1_tests_broken_relu" and "relu_forward" in failure["error"]
    assert failure["attempts"] == 2
    assert rec["verdict"]["message"].count("extension 'cudal1_tests_broken_relu' did not build") == 1
    assert "tried 2 times" in rec["verdict"]["message"]
    assert "EXTENSION_NOT_BUILT" in (tmp_path / "report.html").read_text()
