"""Issue 14, items 6, 9, 10, 13 and 14: what a candidate may leave behind in its process, and what the judge
must not confuse with a cheat.

Real pytest runs with real workers (``judge_run``/``run_pytest``), real ``torch.compile`` (inductor's C++
backend on the CPU), real ``load_inline`` builds and real glibc. GPU-only mechanisms (extension side
streams, a new stream per call) have ``gpu``-marked tests that skip without CUDA.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cudal1_helpers import (FAST, by_candidate, read_ledger, reason, run_pytest, task_source, write,
                            write_candidate, write_task)

LINEAR_TASK = task_source(forward="return torch.relu(self.lin(x)) * 2.0", shape="16, 32", init_args=", n",
                          init_body="self.lin = nn.Linear(n, n)", init_inputs="32")

COMPILED = '''\
"""torch.compile of the task's own computation ({mode})."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)
        self.fn = torch.compile(self._forward{mode_arg})

    def _forward(self, x):
        return torch.relu(self.lin(x)) * 2.0

    def forward(self, x):
        return self.fn(x)
'''


def _compiled(mode: str | None) -> str:
    return COMPILED.format(mode=mode or "default mode", mode_arg=f", mode={mode!r}" if mode else "")


# ------------------------------------------------------------ 9. torch.compile ---

@pytest.fixture(scope="module")
def compiled_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("torch-compile")
    write_task(where / "tasks", 1, "1_linear", LINEAR_TASK)
    for name, mode in (("compile_default", None), ("compile_autotune", "max-autotune-no-cudagraphs")):
        write_candidate(where / "cands", 1, "1_linear", name, _compiled(mode))
    cache = where / "cache"
    result = run_pytest(where, *FAST, "--cudal1-compile-timeout=400", f"--cudal1-tasks={where / 'tasks'}",
                        f"--cudal1-candidates={where / 'cands'}", f"--cudal1-cache-dir={cache}",
                        f"--cudal1-ledger={where / 'ledger.jsonl'}", timeout=900)
    return {"result": result, "records": by_candidate(read_ledger(where / "ledger.jsonl")), "cache": cache}


@pytest.mark.parametrize("name", ["compile_default", "compile_autotune"])
def test_torch_compile_is_judged_like_any_candidate(compiled_run: dict[str, Any], name: str) -> None:
    rec = compiled_run["records"].get(f"L1/1_linear::{name}")
    assert rec is not None, "\n".join(compiled_run["result"].outlines[-40:])
    assert reason(rec) == "OK", rec["verdict"]
    assert rec["timing"] is not None and rec["timing"]["speedup"] > 0
    # compiled in the warm-up call (under the compile timeout), not in a checked trial
    assert "warm_up" in rec["phase_s"] and rec["first_call_ms"] > 0


@pytest.mark.parametrize("name", ["compile_default", "compile_autotune"])
def test_torch_compile_caches_under_the_judges_cache_dir(compiled_run: dict[str, Any], name: str) -> None:
    rec = compiled_run["records"][f"L1/1_linear::{name}"]
    inductor = compiled_run["cache"] / "builds" / rec["candidate_sha256"] / "inductor"
    assert inductor.is_dir() and any(p.is_file() for p in inductor.rglob("*")), "inductor wrote no cache there"


# ------------------------------------------------------ 14. global flags ---

def test_allow_global_refuses_a_numeric_or_unknown_flag(pytester: pytest.Pytester) -> None:
    for bad in ("allow_tf32", "cudnn.benchmark,torch.get_float32_matmul_precision()"):
        result = pytester.runpytest_subprocess("--cudal1", f"--cudal1-allow-global={bad}", "--collect-only")
        assert result.ret != 0
        assert "only algorithm-selection flags can be allowed" in result.stderr.str()


# -------------------------------------------- 10. builds in ModelNew.__init__ ---

INIT_BUILD = '''\
"""A C++ ReLU compiled by load_inline in ModelNew.__init__ (as many released kernels do)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
torch::Tensor relu_twice(torch::Tensor x) {
    auto in = x.contiguous();
    auto out = torch::empty_like(in);
    const float* src = in.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    for (int64_t i = 0; i < in.numel(); ++i) dst[i] = src[i] > 0.0f ? 2.0f * src[i] : 0.0f;
    return out;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = load_inline(name="cudal1_tests_init_relu", cpp_sources=_SOURCE, functions=["relu_twice"],
                               extra_cflags=["-O1"], verbose=False)

    def forward(self, x):
        return self.ext.relu_twice(x)
'''

INIT_RAISES = '''\
"""ModelNew.__init__ raises (after a load_inline import): the build says INIT_ERROR."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline  # noqa: F401 - marks the backend as cpp


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise ValueError("no such layout")

    def forward(self, x):
        return x
'''


@pytest.fixture(scope="module")
def init_build_run(tmp_path_factory: pytest.TempPathFactory, session_cache: Path) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("init-build")
    write_task(where / "tasks", 1, "1_relu", task_source(forward="return torch.relu(x) * 2.0"))
    write_candidate(where / "cands", 1, "1_relu", "init_build", INIT_BUILD)
    write_candidate(where / "cands", 1, "1_relu", "init_raises", INIT_RAISES)
    # A call timeout far below a C++ compile here: construction in the judging worker must find the build done.
    args = [a for a in FAST if not a.startswith("--cudal1-call-timeout")]
    result = run_pytest(where, *args, "--cudal1-call-timeout=5", f"--cudal1-tasks={where / 'tasks'}",
                        f"--cudal1-candidates={where / 'cands'}", f"--cudal1-cache-dir={session_cache}",
                        f"--cudal1-ledger={where / 'ledger.jsonl'}", timeout=600)
    return {"result": result, "records": by_candidate(read_ledger(where / "ledger.jsonl")), "cache": session_cache}


def test_a_build_in_init_compiles_in_the_build_pool(init_build_run: dict[str, Any]) -> None:
    rec = init_build_run["records"].get("L1/1_relu::init_build")
    assert rec is not None, "\n".join(init_build_run["result"].outlines[-40:])
    assert reason(rec) == "OK", rec["verdict"]
    build = init_build_run["cache"] / "builds" / rec["candidate_sha256"]
    assert (build / "ok.json").is_file()
    assert list((build / "torch_extensions").rglob("*.so")), "the build process constructed ModelNew"
    assert rec["phase_s"]["candidate_init"] < 5  # the judging worker's construction found the build


def test_a_construction_that_raises_in_the_build_is_init_error(init_build_run: dict[str, Any]) -> None:
    rec = init_build_run["records"]["L1/1_relu::init_raises"]
    assert reason(rec) == "INIT_ERROR", rec["verdict"]
    assert "no such layout" in rec["verdict"]["message"]


# --------------------------------------------------------- 13. smaller ones ---

MP_THREADPOOL = '''\
"""A multiprocessing.pool.ThreadPool made in every forward, its results awaited, kept open (idle) after it."""
from multiprocessing.pool import ThreadPool

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.pools = []  # kept alive: a collected pool would stop its threads

    def forward(self, x):
        self.pools.append(ThreadPool(2))
        halves = self.pools[-1].map(lambda part: torch.relu(part) * 2.0, [x[:2], x[2:]])
        return torch.cat(halves)
'''

MANY_MODULES = '''\
"""Honest, in a process with a very large sys.modules (the harness's own checks take longer here)."""
import sys
import types

import torch
import torch.nn as nn

_pad = types.ModuleType("cudal1_pad")
for _i in range(400_000):
    sys.modules[f"cudal1_pad_{_i}"] = _pad


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0
'''

ABORTS = '''\
"""Aborts the process on its first call, as a failed C++ assertion does."""
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os.abort()
'''


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("small-ones")
    write_task(where / "tasks", 1, "1_relu", task_source(forward="return torch.relu(x) * 2.0"))
    for name, source in (("mp_threadpool", MP_THREADPOOL), ("many_modules", MANY_MODULES), ("aborts", ABORTS)):
        write_candidate(where / "cands", 1, "1_relu", name, source)
    result = run_pytest(where, *FAST, f"--cudal1-tasks={where / 'tasks'}", f"--cudal1-candidates={where / 'cands'}",
                        f"--cudal1-cache-dir={where / 'cache'}", f"--cudal1-ledger={where / 'ledger.jsonl'}",
                        timeout=600)
    return {"result": result, "records": by_candidate(read_ledger(where / "ledger.jsonl"))}


def test_an_idle_multiprocessing_thread_pool_is_not_deferred_work(small_run: dict[str, Any]) -> None:
    rec = small_run["records"].get("L1/1_relu::mp_threadpool")
    assert rec is not None, "\n".join(small_run["result"].outlines[-40:])
    assert reason(rec) == "OK", rec["verdict"]


def test_the_harness_checks_are_outside_the_timer_yardstick(small_run: dict[str, Any]) -> None:
    rec = small_run["records"]["L1/1_relu::many_modules"]
    assert reason(rec) == "OK", rec["verdict"]


def test_a_worker_that_aborts_names_where(small_run: dict[str, Any]) -> None:
    rec = small_run["records"]["L1/1_relu::aborts"]
    assert reason(rec) == "CRASH"
    message = rec["verdict"]["message"]
    assert "SIGABRT" in message and "the warm-up call" in message and "aborts.py" in message, message


ALLOCATOR_PROBE = '''\
import ctypes
import resource

_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]
_N = 4 << 20


def _temporaries():  # six live 4 MiB temporaries, as one call of a model might make
    blocks = [_libc.malloc(_N) for _ in range(6)]
    for b in blocks:
        _libc.memset(b, 1, _N)
    for b in blocks:
        _libc.free(b)


for _ in range(3):
    _temporaries()
_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    _temporaries()
with open({out!r}, "w") as _f:
    _f.write(str((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - _before) / 10))
'''


def _run_at_load_in_both_workers(tmp_path: Path, probe: str) -> dict[str, str]:
    """``probe`` run as the reference worker's task source and as the candidate worker's candidate; what
    each wrote to the file its ``{out!r}`` names."""
    from pytest_cudal1.workers.process import WorkerProcess

    for role in ("reference", "candidate"):
        source = probe.format(out=str(tmp_path / f"{role}.out"))
        worker = WorkerProcess(role, tmp_path / f"{role}.log")
        try:
            if role == "reference":  # the task source runs at load
                worker.request("load", {"source": source + "\n" + task_source(), "origin": "probe.py", "seed": 1}, 120)
            else:
                path = write(tmp_path / "probe_candidate.py", source)
                worker.request("load", {"path": str(path), "module_name": "probe_candidate"}, 120)
        finally:
            worker.close()
    return {role: (tmp_path / f"{role}.out").read_text() for role in ("reference", "candidate")}


def test_both_workers_keep_freed_temporaries_instead_of_faulting_them_back(tmp_path: Path) -> None:
    """glibc's dynamic thresholds would hand 24 MiB of temporaries back to the OS after every call here."""
    faults = {role: float(n) for role, n in _run_at_load_in_both_workers(tmp_path, ALLOCATOR_PROBE).items()}
    assert faults["reference"] < 100 and faults["candidate"] < 100, faults  # 6144 pages a call when trimmed


TF32_PROBE = """\
import torch
with open({out!r}, "w") as _f:
    _f.write(f"{{torch.backends.cudnn.allow_tf32}} {{torch.backends.cuda.matmul.allow_tf32}}")
"""


def test_both_workers_run_float32_in_float32(tmp_path: Path) -> None:
    """PyTorch's default lets cuDNN run float32 convolutions in TF32, so an exact rewrite of a convolution
    failed or passed by which algorithm cuDNN picked: both workers turn it off before any task or candidate
    code (a candidate that turns it on: the cheat case ``gs_cudnn_tf32_import``)."""
    assert _run_at_load_in_both_workers(tmp_path, TF32_PROBE) == {"reference": "False False", "candidate": "False False"}


# ---------------------------------------------------- 6. streams (GPU only) ---

EXT_STREAM = '''\
"""A CUDA kernel launched by a load_inline extension on a non-blocking stream of its own, never joined."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <cuda_runtime.h>
__global__ void relu2(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? 2.f * x[i] : 0.f;
}
static cudaStream_t side = nullptr;
torch::Tensor relu2_side(torch::Tensor x) {
    if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    auto y = torch::empty_like(x);
    long n = x.numel();
    relu2<<<(n + 255) / 256, 256, 0, side>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
_ext = load_inline(name="cudal1_tests_ext_side_stream", cpp_sources="torch::Tensor relu2_side(torch::Tensor x);",
                   cuda_sources=_CUDA, functions=["relu2_side"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.relu2_side(x.contiguous())
'''

STREAM_PER_CALL = '''\
"""A new torch stream on every call, joined before return (honest, if wasteful)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        side = torch.cuda.Stream(device=x.device)
        side.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(side):
            y = torch.relu(x) * 2.0
        torch.cuda.current_stream(x.device).wait_stream(side)
        y.record_stream(torch.cuda.current_stream(x.device))
        return y
'''


@pytest.mark.gpu
@pytest.mark.skipif("not __import__('torch').cuda.is_available()", reason="needs a CUDA GPU")
def test_extension_side_streams_are_named(tmp_path: Path) -> None:
    write_task(tmp_path / "tasks", 1, "1_relu", task_source(forward="return torch.relu(x) * 2.0",
                                                            shape="256, 1024"))
    write_candidate(tmp_path / "cands", 1, "1_relu", "ext_side_stream", EXT_STREAM)
    write_candidate(tmp_path / "cands", 1, "1_relu", "stream_per_call", STREAM_PER_CALL)
    result = run_pytest(tmp_path, *FAST, f"--cudal1-tasks={tmp_path / 'tasks'}",
                        f"--cudal1-candidates={tmp_path / 'cands'}", f"--cudal1-cache-dir={tmp_path / 'cache'}",
                        f"--cudal1-ledger={tmp_path / 'ledger.jsonl'}", timeout=600)
    records = by_candidate(read_ledger(tmp_path / "ledger.jsonl"))
    side = records["L1/1_relu::ext_side_stream"]
    # Its output is overwritten by the harness's writes queued behind the hold (H200 session 8:
    # UNINITIALIZED_OUTPUT): the cause, a stream unordered with the caller's, is what gets named.
    assert reason(side) == "STREAM_ESCAPE", "\n".join(result.outlines[-40:])
    assert "does not wait for the caller's stream" in side["verdict"]["message"], side["verdict"]
    per_call = records["L1/1_relu::stream_per_call"]
    if reason(per_call) == "CRASH":  # not a bare one: where and in which phase it died
        assert "(" in per_call["verdict"]["message"] and " at " in per_call["verdict"]["message"], per_call["verdict"]
    else:
        assert reason(per_call) == "OK", per_call["verdict"]
