"""Candidate workers started ahead: the next item's worker comes up while the current item is judged.

Only trusted work overlaps an item: a spare imports no candidate code until its own item sends
``load``. A spare is started for the next (task, candidate) when it is known; when it is not yet (the
optimizer's next round, a trainer's next group: their code is still to be written), for whichever comes
(``prefetch_any``): it preloads only what every candidate needs and learns the candidate's folders at
``load``. That also lets a spare started for a candidate that is not judged next (a task budget ended
its round, a test was deselected) serve the one that is. It starts in two parts (``runtime.WarmStart``).
The first touches no GPU (interpreter, ``import torch``, the backend's libraries): on a GPU it may
overlap the current item's timing; on a CPU machine, where it would share the cores with the measurement,
``await_ready`` waits for it before timing. The second, the CUDA context, is asked for by ``to_device``
once the current item is no longer timed. The reference pool keeps the next task's spare reference
worker alike (``references.ReferencePool``).
"""

from __future__ import annotations

from typing import Callable

from kernelbench.loaders import Task
from pytest_cudal1.candidates import Candidate
from pytest_cudal1.references import ReferencePool
from pytest_cudal1.workers.process import WorkerFailure, WorkerProcess


ANY = ("", "")  # the key of a spare started for whichever candidate comes next
FOLDERS_READ_AT_IMPORT = {"numba"}  # preloads that read a candidate's cache folder when imported (``builds.folders``)


class Spares:
    """The next item's candidate worker (at most one), and the reference pool's spare beside it."""

    def __init__(self, start: Callable[[Task, Candidate], WorkerProcess], start_any: Callable[[], WorkerProcess],
                 references: ReferencePool, timeout: float) -> None:
        self.start = start  # a fresh candidate worker for (task, candidate)
        self.start_any = start_any  # a fresh candidate worker for any candidate
        self.references = references
        self.timeout = timeout  # the compile timeout: a start that takes longer is a failed start
        self.spare: tuple[tuple[str, str], WorkerProcess] | None = None

    def prefetch(self, task: Task, candidate: Candidate) -> None:
        """Start the worker for (task, candidate), and for another task its reference, unless one is started."""
        if self.spare is not None:
            return
        self.references.prefetch(task)
        self._started((task.id, candidate.sha256), self.start(task, candidate))

    def prefetch_any(self, next_task: Task | None) -> None:
        """Start a worker for whichever candidate comes next, unless one is started, and ``next_task``'s reference."""
        if next_task is not None:
            self.references.prefetch(next_task)
        if self.spare is None:
            self._started(ANY, self.start_any())

    def _started(self, key: tuple[str, str], worker: WorkerProcess) -> None:
        worker.start_request("ready", {"device": False})  # answered once its CPU part is done
        self.spare = (key, worker)

    def to_device(self) -> None:
        """The spares' device part, asked for when the current item's timing is over."""
        if self.spare is not None and self.spare[1].outstanding == ["ready"]:
            try:
                self.spare[1].start_request("ready", {"device": True})
            except WorkerFailure:  # it died: the next item starts its own
                self._drop()
        self.references.to_device()

    def await_ready(self) -> None:
        """The barrier before timing on a CPU machine: every spare has finished its start (and load ahead).
        (On a GPU the judge does not wait: the spares' work so far touches no GPU.) A spare that failed to
        start is closed; the next item starts its own."""
        if self.spare is not None and self.spare[1].pending is not None:
            try:
                self.spare[1].finish_all(self.timeout)
            except WorkerFailure:
                self._drop()
        self.references.await_spare()
        self.references.await_blank()

    def take(self, task: Task, candidate: Candidate) -> tuple[WorkerProcess, str]:
        """The worker for (task, candidate) and how it started: the spare started for it ("spare"), for any
        candidate ("spare_any") or for another one that was not judged next ("spare_other"), or a fresh one.

        A spare learns its candidate's folders at ``load``, so one started for another candidate serves
        this one, unless it preloaded a library that read the other's folders at import (numba)."""
        spare, self.spare = self.spare, None
        if spare is None:
            return self.start(task, candidate), "fresh"
        key, worker = spare
        if worker.proc.poll() is None:
            if key == (task.id, candidate.sha256):
                return worker, "spare"
            if key == ANY:
                return worker, "spare_any"
            if not FOLDERS_READ_AT_IMPORT.intersection(worker.preload):
                with open(worker.log_path, "a") as log:  # its log is named for the candidate it was started for
                    log.write(f"--- started for another candidate, judges {task.id} {candidate.name} ---\n")
                return worker, "spare_other"
        worker.close()
        return self.start(task, candidate), "fresh"

    def _drop(self) -> None:
        if self.spare is not None:
            self.spare[1].close()
            self.spare = None

    def close(self) -> None:
        self._drop()
