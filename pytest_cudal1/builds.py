"""Compiling candidates ahead of judging: separate processes, a timeout, a cache by source hash.

``load_inline`` candidates compile when their module is imported or when
``ModelNew`` is constructed, so a build is an import and a construction from the
task's init inputs in a throw-away process (``candidate --compile-only``) whose
extension, Triton, CuPy, Numba and inductor caches live in ``CACHE/builds/<sha256>/``.
The judging worker later imports with the same cache folders and finds the
build done. Builds run on a thread pool sized to this process's share of the
cores (``build_workers``) while the GPU judges other items; a successful build leaves ``ok.json`` so an unchanged
candidate never compiles again across runs. On timeout the build's whole
process group is killed and the lock files it left are removed.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kernelbench.loaders import Task
from pytest_cudal1.candidates import Candidate
from pytest_cudal1.reasons import Reason

COMPILED_BACKENDS = ("cuda", "cpp")
CONSTRUCTION_FAILED = "cudal1: ModelNew(*get_init_inputs()) raised in the build"  # the build's log says so


@dataclasses.dataclass
class BuildResult:
    reason: Reason  # OK or the failure's code
    message: str = ""
    seconds: float = 0.0
    cached: bool = False
    log_tail: str = ""


def build_workers(processes: int = 1, cores: int | None = None) -> int:
    """Build threads for one of ``processes`` judges sharing a host of ``cores`` cores (default: this one's).

    Several judges on one host (xdist workers, Ray actors) each build in parallel; sized alike they
    never queue more compilers than the host has cores.
    """
    return max(1, (cores or os.cpu_count() or 1) // max(1, processes))


class BuildPool:
    """Builds candidates in the background; ``result`` waits for one."""

    def __init__(self, cache_root: Path, timeout: float, gpu_arch: str | None, workers: int | None = None) -> None:
        self.cache_root = cache_root
        self.timeout = timeout
        self.gpu_arch = gpu_arch
        self.workers = workers or build_workers()
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.workers)
        self.futures: dict[str, concurrent.futures.Future[BuildResult]] = {}

    def build_dir(self, candidate: Candidate) -> Path:
        d = self.cache_root / "builds" / candidate.sha256
        d.mkdir(parents=True, exist_ok=True)
        return d

    def source_path(self, candidate: Candidate) -> str:
        """The candidate's real file, or a cached copy of its source (Triton needs a file)."""
        return candidate.path or self._source_copy(candidate.sha256, candidate.source)

    def _source_copy(self, sha256: str, source: str) -> str:
        path = self.cache_root / "sources" / f"{sha256}.py"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(source, encoding="utf-8")
            tmp.replace(path)
        return str(path)

    def module_name(self, candidate: Candidate) -> str:
        return f"cudal1_candidate_{candidate.sha256[:16]}"

    def env(self, candidate: Candidate, gpu: bool) -> dict[str, str]:
        """Cache folders (and CPU simulators) for every process that imports this candidate."""
        return {**self.folders(candidate), **self.common_env(gpu)}

    def folders(self, candidate: Candidate) -> dict[str, str]:
        """The candidate's own cache folders. Libraries read them when they compile (numba when first imported,
        which a worker that did not preload it leaves to the candidate's import), and none is a setting the judge
        watches (``process_state.watched_env``): a worker started before its candidate was known sets them when it loads
        the candidate (``CandidateWorker.load``)."""
        d = self.build_dir(candidate)
        return {
            "TORCH_EXTENSIONS_DIR": str(d / "torch_extensions"),
            "TRITON_CACHE_DIR": str(d / "triton"),
            "CUPY_CACHE_DIR": str(d / "cupy"),
            "NUMBA_CACHE_DIR": str(d / "numba"),
            "TORCHINDUCTOR_CACHE_DIR": str(d / "inductor"),  # torch.compile: warm on a rerun, never /tmp
        }

    def common_env(self, gpu: bool) -> dict[str, str]:
        """What every candidate's processes share: build parallelism, the GPU's architecture, CPU simulators."""
        env = {"MAX_JOBS": "1"}
        if self.gpu_arch and "TORCH_CUDA_ARCH_LIST" not in os.environ:
            env["TORCH_CUDA_ARCH_LIST"] = self.gpu_arch
        if not gpu:
            env["TRITON_INTERPRET"] = "1"
            env["NUMBA_ENABLE_CUDASIM"] = "1"
        return env

    def submit(self, candidate: Candidate, gpu: bool, task: Task | None = None) -> None:
        """Start the candidate's build; with its ``task``, ModelNew is constructed from the task's init inputs too."""
        if candidate.backend in COMPILED_BACKENDS and candidate.sha256 not in self.futures:
            self.futures[candidate.sha256] = self.pool.submit(self._build, candidate, gpu, task)

    def result(self, candidate: Candidate, gpu: bool, task: Task | None = None) -> BuildResult:
        """Wait for the candidate's build; backends that compile lazily need none."""
        if candidate.backend not in COMPILED_BACKENDS:
            return BuildResult(Reason.OK, "compiles at first call")
        self.submit(candidate, gpu, task)
        return self.futures[candidate.sha256].result()

    def _build(self, candidate: Candidate, gpu: bool, task: Task | None) -> BuildResult:
        d = self.build_dir(candidate)
        marker = d / "ok.json"
        if marker.exists():
            info = json.loads(marker.read_text())
            return BuildResult(Reason.OK, f"cached build (compiled in {info.get('seconds', 0.0):.1f} s earlier)",
                               0.0, cached=True)
        log_path = d / "build.log"
        task_args = [self._source_copy(task.sha256, task.source)] if task is not None else []
        t0 = time.perf_counter()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "pytest_cudal1.workers.candidate", "--compile-only",
                 self.source_path(candidate), self.module_name(candidate), *task_args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, **self.env(candidate, gpu)}, cwd=str(d),
            )
            try:
                code = proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                for lock in d.rglob("lock"):
                    lock.unlink(missing_ok=True)
                return BuildResult(Reason.COMPILE_TIMEOUT, f"build ran past {self.timeout:.0f} s; killed",
                                   time.perf_counter() - t0, log_tail=_tail(log_path))
        seconds = time.perf_counter() - t0
        tail = _tail(log_path)
        if code == 0:
            marker.write_text(json.dumps({"seconds": seconds}))
            return BuildResult(Reason.OK, "built", seconds)
        return BuildResult(_classify_failure(tail), _last_line(tail), seconds, log_tail=tail)

    def counts(self) -> dict[str, int]:
        """Builds done, running and queued, for progress lines."""
        futures = list(self.futures.values())
        done = sum(f.done() for f in futures)
        running = sum(f.running() for f in futures)
        return {"done": done, "running": running, "queued": len(futures) - done - running}

    def pending(self, candidate: Candidate) -> bool:
        """Is the candidate's build still queued or running?"""
        future = self.futures.get(candidate.sha256)
        return future is not None and not future.done()

    def wait_idle(self) -> None:
        """Block until every submitted build is done: CPU timings must not share cores with compilers."""
        concurrent.futures.wait(list(self.futures.values()))

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def _classify_failure(log: str) -> Reason:
    compile_failed = "Error building extension" in log or "CompilationError" in log or "ninja: build stopped" in log
    if CONSTRUCTION_FAILED in log:
        return Reason.COMPILE_ERROR if compile_failed else Reason.INIT_ERROR
    if "SyntaxError" in log:
        return Reason.SYNTAX_ERROR
    if compile_failed:
        return Reason.COMPILE_ERROR
    return Reason.IMPORT_ERROR


def _tail(path: Path, limit: int = 4000) -> str:
    return path.read_bytes()[-limit:].decode("utf-8", "replace")


def _last_line(log: str) -> str:
    lines = [ln for ln in log.strip().splitlines() if ln.strip()]
    return lines[-1][:500] if lines else "build failed with no output"
