"""The trusted reference workers: one per task, reused by consecutive candidates of that task."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from kernelbench.loaders import Task
from pytest_cudal1.messages import too_large_message
from pytest_cudal1.reasons import Reason
from pytest_cudal1.recipes import Recipe
from pytest_cudal1.workers.process import WorkerFailure, WorkerProcess

if TYPE_CHECKING:
    from pytest_cudal1.judge import JudgeConfig


class ReferencePool:
    """One trusted reference worker per task, reused by consecutive candidates of that task."""

    def __init__(self, cfg: "JudgeConfig") -> None:
        self.cfg = cfg
        self.task_sha: str | None = None
        self.worker: WorkerProcess | None = None
        self.init_inputs: list[Any] = []
        self.spare: tuple[str, WorkerProcess] | None = None  # (task sha, worker) started for the next task
        self.replicas: list[WorkerProcess] = []  # more reference workers of the task, for timing in several pairs
        self.call_peak = 0  # the most one reference call needed beyond its inputs (``ReferenceWorker.probe``)

    def _start(self, task: Task) -> WorkerProcess:
        safe = task.id.replace("/", "_")
        return WorkerProcess("reference", self.cfg.workdir / "logs" / f"reference-{safe}.log")

    def prefetch(self, task: Task) -> None:
        """Start the worker for the next item's task early, when that task differs from the current one."""
        if task.sha256 != self.task_sha and self.spare is None:
            self.spare = (task.sha256, self._start(task))

    def get(self, task: Task) -> WorkerProcess:
        if self.worker is not None and self.task_sha == task.sha256 and self.worker.proc.poll() is None:
            return self.worker
        self.close_current()
        spare, self.spare = self.spare, None
        self.worker = claim(spare, task.sha256) or self._start(task)
        self.task_sha = task.sha256
        loaded = self.worker.request("load", {"source": task.source, "origin": task.origin, "seed": self.cfg.seed},
                                     self.cfg.compile_timeout)
        self.init_inputs = loaded["init_inputs"]
        probe = self.worker.request("probe", {"recipe": dataclasses.asdict(Recipe(seed=self.cfg.seed, family="task",
                                                                                  scale=1.0))},
                                    self.cfg.call_timeout * 4)
        if not probe["fits"]:
            raise WorkerFailure(Reason.REFERENCE_TOO_LARGE, too_large_message(task, probe), probe)
        self.call_peak = int(probe["call_peak_bytes"])
        return self.worker

    def replica(self, task: Task, i: int) -> WorkerProcess:
        """Reference worker ``i`` (1, 2, ...) of the current task, loaded: another process to time in."""
        assert self.task_sha == task.sha256
        if i <= len(self.replicas) and self.replicas[i - 1].proc.poll() is not None:
            self.replicas.pop(i - 1).close()
        while len(self.replicas) < i:
            worker = self._start(task)
            worker.request("load", {"source": task.source, "origin": task.origin, "seed": self.cfg.seed},
                           self.cfg.compile_timeout)
            self.replicas.append(worker)
        return self.replicas[i - 1]

    def close_current(self) -> None:
        for worker in [self.worker, *self.replicas]:
            if worker is not None:
                worker.close()
        self.worker, self.task_sha, self.replicas = None, None, []

    def close(self) -> None:
        """The current worker and any spare."""
        self.close_current()
        if self.spare is not None:
            self.spare[1].close()
            self.spare = None


def claim(spare: tuple[Any, WorkerProcess] | None, key: Any) -> WorkerProcess | None:
    """The spare worker if it was started for ``key`` and still runs; any other spare is closed."""
    if spare is None:
        return None
    if spare[0] == key and spare[1].proc.poll() is None:
        return spare[1]
    spare[1].close()
    return None
