"""Judging on several GPUs of one host under pytest-xdist (``pytest -n N``).

Each worker owns one GPU: worker ``gwN`` sees only GPU ``N`` of the visible ones, set before any
CUDA context exists. More workers than visible GPUs is a usage error, since two workers timing on
one GPU would time each other's kernels; ``-n auto`` means one worker per GPU (xdist's CPU count
on a machine without one). Each worker builds on its share of the cores. Judged items go to workers
by task (``TaskScheduling``): the candidates of one task run back to back on one worker, which
keeps its reference worker, and a task with many candidates is cut into parts so that every GPU
gets work. The ledger takes appends from every worker (``ledger``); the benchmark file, the HTML
report and the terminal summary are written by the controller from the records the workers report.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

import pytest

JUDGED_ID = re.compile(r"^L\d+/[^:\s]+::.+$")  # a judged item's node id: task::candidate


def visible_gpus() -> list[str]:
    """The GPUs this process may use: CUDA_VISIBLE_DEVICES's entries, else every GPU NVML counts."""
    from pytest_cudal1 import environment

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip()]
    return [str(i) for i in range(environment.gpu_count())]


def worker_count(config: pytest.Config) -> int:
    """Judging processes on this host: xdist's worker count, 1 without xdist."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return int(workerinput.get("workercount", 1))
    return int(getattr(config.option, "numprocesses", None) or 1)


def assign_gpu_to_xdist_worker(config: pytest.Config) -> None:
    """Under pytest-xdist, worker gwN owns GPU N of the visible ones, before any CUDA context exists."""
    worker = getattr(config, "workerinput", {}).get("workerid", "")
    if not worker.startswith("gw"):
        return
    devices = visible_gpus()
    if devices:
        os.environ["CUDA_VISIBLE_DEVICES"] = devices[int(worker[2:]) % len(devices)]


def check_workers_fit_gpus(config: pytest.Config) -> None:
    """In the controller: refuse more xdist workers than visible GPUs (no GPU at all: CPU judging, any N)."""
    workers = getattr(config.option, "numprocesses", None)
    if hasattr(config, "workerinput") or not isinstance(workers, int) or workers < 2:
        return
    devices = visible_gpus()
    if devices and workers > len(devices):
        raise pytest.UsageError(
            f"-n {workers}: only {len(devices)} GPU(s) visible ({','.join(devices)}); each xdist worker times on "
            f"a GPU of its own, and two workers on one GPU would time each other's kernels. "
            f"Use -n {len(devices)} (or -n auto: one worker per GPU)")


def task_scopes(nodeids: list[str], workers: int) -> dict[str, str]:
    """Each judged item's work unit: its task, or a part of it when the task holds a large share.

    A part holds at most ceil(items / (2 * workers)) items, so no task keeps one GPU busy while
    others idle; parts of one task are cut evenly and stay in collection order.
    """
    by_task: dict[str, list[str]] = {}
    for nodeid in nodeids:
        if JUDGED_ID.match(nodeid):
            by_task.setdefault(nodeid.rsplit("::", 1)[0], []).append(nodeid)
    cap = max(1, math.ceil(len(nodeids) / (2 * max(1, workers))))
    scopes: dict[str, str] = {}
    for task, ids in by_task.items():
        parts = math.ceil(len(ids) / cap)
        size = math.ceil(len(ids) / parts)
        for i, nodeid in enumerate(ids):
            scopes[nodeid] = task if parts == 1 else f"{task}#part{i // size + 1}"
    return scopes


def make_task_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's loadscope scheduling with judged items scoped by ``task_scopes``; other tests as loadscope does."""
    from xdist.scheduler import LoadScopeScheduling

    class TaskScheduling(LoadScopeScheduling):
        _scopes: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._scopes is None:  # called first in schedule(), once the collection is known
                self._scopes = task_scopes(list(self.collection or []), len(self.nodes))
            return self._scopes.get(nodeid) or super()._split_scope(nodeid)

    return TaskScheduling(config, log)
