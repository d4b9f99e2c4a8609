"""The trusted reference workers: one per task, reused by consecutive candidates of that task."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from kernelbench.loaders import Task
from pytest_cudal1.messages import too_large_message
from pytest_cudal1.reasons import Reason
from pytest_cudal1.recipes import Recipe
from pytest_cudal1.workers.process import Closing, WorkerFailure, WorkerProcess

if TYPE_CHECKING:
    from pytest_cudal1.judge import JudgeConfig


# Imported by a reference worker at start-up: ``probe``'s sizing on the meta device imports dynamo at its first op
# (3 s on a loaded 2-core machine), which would otherwise fall in the item's ``reference_start``.
PRELOADED = ("torch._dynamo",)


class ReferencePool:
    """One trusted reference worker per task, reused by consecutive candidates of that task."""

    def __init__(self, cfg: "JudgeConfig", closing: Closing, blanks: int = 1) -> None:
        self.cfg = cfg
        self.closing = closing  # the judge's workers being ended: gone before a probe reads the free memory
        self.task_sha: str | None = None
        self.worker: WorkerProcess | None = None
        self.init_inputs: list[Any] = []
        self.spare: tuple[str, WorkerProcess] | None = None  # (task sha, worker) started for the next task
        self.ahead: dict[str, Any] | None = None  # the spare's answer to its load made ahead, once read
        self.spare_placed = False  # the spare was asked for its load's device part (``to_device``)
        self.failed_ahead: set[str] = set()  # tasks whose load ahead failed: loaded again only by ``get``
        self.start = "fresh"  # how ``get`` came by the current worker: "kept", "loaded_ahead" or "fresh"
        self.start_s: dict[str, float] = {}  # and where its time went, by step (``get``)
        self.replicas: list[WorkerProcess] = []  # more reference workers of the task, for timing in several pairs
        # Started ahead for whichever tasks come (``blanks`` of them): their interpreter, torch and ``PRELOADED``
        # imported while items are judged. Those imports were most of a new task's reference start on an H100
        # (2-5 s of a 4-6 s item).
        self.depth = blanks
        self.blanks: list[WorkerProcess] = []
        self.blanks_started = 0
        self.call_peak = 0  # the most one reference call needed beyond its inputs (``ReferenceWorker.probe``)

    def _start(self, task: Task, blank: bool = True) -> WorkerProcess:
        """A reference worker for ``task``: with ``blank``, the oldest blank that still runs, and blanks are started
        up to ``depth``; else a new one (a timing replica: no start may share the cores with a measurement on the
        CPU).

        The blank's log takes the task's name: ``reference-<task>.log``, or ``reference-<task>-<n>.log`` where the
        task had workers before."""
        logs, safe = self.cfg.workdir / "logs", task.id.replace("/", "_")
        log = logs / f"reference-{safe}.log"
        if not blank:
            return WorkerProcess("reference", log, preload=PRELOADED)
        for dead in [b for b in self.blanks if b.proc.poll() is not None]:
            self.blanks.remove(dead)
            dead.close()
        if self.blanks:
            worker = self.blanks.pop(0)
            n = 1
            while log.exists():
                n += 1
                log = logs / f"reference-{safe}-{n}.log"
            worker.log_path = worker.log_path.replace(log)
            with worker.log_path.open("a") as f:
                f.write(f"--- started ahead; loads {task.id} ---\n")
        else:
            worker = WorkerProcess("reference", log, preload=PRELOADED)
        while len(self.blanks) < self.depth:
            self.blanks_started += 1
            self.blanks.append(WorkerProcess("reference", logs / f"reference-next-{self.blanks_started}.log",
                                             preload=PRELOADED))
        return worker

    def await_blank(self) -> None:
        """Wait for the blanks' imports (the barrier before timing on the CPU, where they would share the cores)."""
        for blank in list(self.blanks):
            if blank.proc.poll() is None:
                try:
                    blank.request("ready", None, self.cfg.compile_timeout)
                except WorkerFailure:  # the next start makes a new one
                    self.blanks.remove(blank)
                    blank.close()

    def _load_body(self, task: Task, ahead: bool = False) -> dict[str, Any]:
        return {"source": task.source, "origin": task.origin, "seed": self.cfg.seed, "ahead": ahead}

    def prefetch(self, task: Task) -> None:
        """Start the worker for the next item's task early, when that task differs from the current one,
        and have it load the task (trusted code) meanwhile: the part that touches no GPU (``to_device``
        asks for the rest).

        Not ``probe``: it decides REFERENCE_TOO_LARGE from the free memory, which the current item holds.
        """
        if task.sha256 != self.task_sha and self.spare is None and task.sha256 not in self.failed_ahead:
            worker = self._start(task)
            worker.start_request("load", self._load_body(task, ahead=True))
            self.spare, self.ahead, self.spare_placed = (task.sha256, worker), None, False

    def to_device(self) -> None:
        """Ask the spare for its load's device part (no item is being timed now); ``get`` reads the answer."""
        if self.spare is None or self.spare_placed:
            return
        self.spare_placed = True
        try:
            self.spare[1].start_request("to_device")
        except WorkerFailure:  # it died: ``get`` starts a fresh one
            self.spare[1].close()
            self.spare = None

    def await_spare(self) -> None:
        """Wait for what the spare was asked (the barrier before timing on the CPU, and ``get``); keep its
        load's answer for ``get``.

        A spare whose load failed, however, is closed: ``get`` loads the task again in a fresh worker,
        so the failure is named exactly as a load made then names it.
        """
        if self.spare is None or self.spare[1].pending is None:
            return
        try:
            worker = self.spare[1]
            if worker.pending == "load":
                self.ahead = worker.finish_request(self.cfg.compile_timeout)
            worker.finish_all(self.cfg.compile_timeout)
        except WorkerFailure:
            self.failed_ahead.add(self.spare[0])
            self.spare[1].close()
            self.spare = None

    def get(self, task: Task) -> WorkerProcess:
        """The task's loaded and probed reference worker: the one kept, the spare loaded ahead, or a new one."""
        if self.worker is not None and self.task_sha == task.sha256 and self.worker.proc.poll() is None:
            self.start, self.start_s = "kept", {}
            return self.worker
        self.close_current(later=True)
        began = time.perf_counter()
        if self.spare is not None and self.spare[0] == task.sha256:
            self.await_spare()
        spare, ahead = self.spare, self.ahead
        self.spare, self.ahead = None, None
        self.worker, self.task_sha = claim(spare, task.sha256), task.sha256
        self.start_s = {"spare_wait": time.perf_counter() - began}
        if self.worker is not None and ahead is not None:
            self.start, loaded = "loaded_ahead", ahead
        else:  # the worker is kept in ``self.worker`` first, so ``close_current`` ends it if its load fails
            self.worker, self.start = self.worker or self._start(task), "fresh"
            loaded = self.worker.request("load", self._load_body(task), self.cfg.compile_timeout)
        self.init_inputs = loaded["init_inputs"]
        self.start_s["load"] = time.perf_counter() - began - self.start_s["spare_wait"]
        self.closing.reap()
        self.start_s["teardown_wait"] = time.perf_counter() - began - sum(self.start_s.values())
        probe = self.worker.request("probe", {"recipe": dataclasses.asdict(Recipe(seed=self.cfg.seed, family="task",
                                                                                  scale=1.0))},
                                    self.cfg.call_timeout * 4)
        # The probe's own steps, and the rest of its request (the pipe, the reply): where a new task's start goes.
        self.start_s.update({f"probe_{k}": v for k, v in probe.get("seconds", {}).items()})
        self.start_s["probe_request"] = time.perf_counter() - began - sum(self.start_s.values())
        self.start_s = {k: round(v, 4) for k, v in self.start_s.items()}
        if not probe["fits"]:
            raise WorkerFailure(Reason.REFERENCE_TOO_LARGE, too_large_message(task, probe), probe)
        if probe["stateful"]:
            raise WorkerFailure(Reason.STATEFUL_REFERENCE, f"{task.id}: two calls of its Model on the same inputs, one "
                                f"after the other, differ by {probe['history_change']:.3g} of the output's largest "
                                "element: it keeps state between calls", probe)
        self.call_peak = int(probe["call_peak_bytes"])
        return self.worker

    def replica(self, task: Task, i: int) -> WorkerProcess:
        """Reference worker ``i`` (1, 2, ...) of the current task, loaded: another process to time in."""
        assert self.task_sha == task.sha256
        if i <= len(self.replicas) and self.replicas[i - 1].proc.poll() is not None:
            self.replicas.pop(i - 1).close()
        while len(self.replicas) < i:
            worker = self._start(task, blank=False)
            worker.request("load", self._load_body(task), self.cfg.compile_timeout)
            self.replicas.append(worker)
        return self.replicas[i - 1]

    def close_current(self, later: bool = False) -> None:
        """End the current task's workers; ``later``: ask them to exit now, ``closing`` reaps them."""
        for worker in [self.worker, *self.replicas]:
            if worker is not None and later:
                self.closing.add(worker)
            elif worker is not None:
                worker.close()
        self.worker, self.task_sha, self.replicas = None, None, []

    def close(self) -> None:
        """The current worker, any spare and the blanks."""
        self.close_current()
        if self.spare is not None:
            self.spare[1].close()
            self.spare, self.ahead = None, None
        for blank in self.blanks:
            blank.close()
        self.blanks = []


def claim(spare: tuple[Any, WorkerProcess] | None, key: Any) -> WorkerProcess | None:
    """The spare worker if it was started for ``key`` and still runs; any other spare is closed."""
    if spare is None:
        return None
    if spare[0] == key and spare[1].proc.poll() is None:
        return spare[1]
    spare[1].close()
    return None
