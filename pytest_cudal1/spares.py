"""Candidate workers started ahead: the next items' workers come up while the current item is judged.

Only trusted work overlaps an item: a spare imports no candidate code until its own item sends
``load``. Spares are started for the next (task, candidate) pairs when they are known, as many items
ahead as ``--cudal1-lookahead``; when they are not yet (the optimizer's next round, a
trainer's next group: their code is still to be written), one for whichever comes (``prefetch_any``):
it preloads only what every candidate needs and learns the candidate's folders at ``load``. That also
lets a spare started for a candidate that is not judged next (a task budget ended its round, a test was
deselected) serve the one that is. It starts in two parts (``runtime.WarmStart``). The first touches
no GPU (interpreter, ``import torch``, the backend's libraries): on a GPU it may overlap the current
item's timing; on a CPU machine, where it would share the cores with the measurement, ``await_ready``
waits for it before timing. The second, the CUDA context, is asked for by ``to_device`` once the
current item is no longer timed, for the next item's spare only: a context holds device memory the
items between would lose. The reference pool keeps the next task's spare reference worker alike
(``references.ReferencePool``).
"""

from __future__ import annotations

from typing import Callable, Sequence

from kernelbench.loaders import Task
from pytest_cudal1.candidates import Candidate
from pytest_cudal1.references import ReferencePool
from pytest_cudal1.workers.process import WorkerFailure, WorkerProcess


ANY = ("", "", "")  # the key of a spare started for whichever candidate comes next
FOLDERS_READ_AT_IMPORT = {"numba"}  # preloads that read a candidate's cache folder when imported (``builds.folders``)


def spare_key(task: Task, candidate: Candidate) -> tuple[str, str, str]:
    """What a spare is started for; the name too, so that rollouts with the same code get one each."""
    return task.id, candidate.name, candidate.sha256


class Spares:
    """The next items' candidate workers (up to ``depth``), and the reference pool's spare beside them."""

    def __init__(self, start: Callable[[Task, Candidate], WorkerProcess], start_any: Callable[[], WorkerProcess],
                 references: ReferencePool, timeout: float, depth: int = 1) -> None:
        self.start = start  # a fresh candidate worker for (task, candidate)
        self.start_any = start_any  # a fresh candidate worker for any candidate
        self.references = references
        self.timeout = timeout  # the compile timeout: a start that takes longer is a failed start
        self.depth = depth
        self.waiting: list[tuple[tuple[str, str, str], WorkerProcess]] = []  # in the order they were started

    def prefetch(self, pairs: Sequence[tuple[Task, Candidate]]) -> None:
        """Start workers for the next ``depth`` pairs that have none, and the first pair's reference when its task
        is another."""
        if not pairs:
            return
        self.references.prefetch(pairs[0][0])
        for task, candidate in pairs[:self.depth]:
            key = spare_key(task, candidate)
            if len(self.waiting) < self.depth and all(k != key for k, _ in self.waiting):
                self._started(key, self.start(task, candidate))

    def prefetch_any(self, next_task: Task | None) -> None:
        """Start a worker for whichever candidate comes next, unless one waits, and ``next_task``'s reference."""
        if next_task is not None:
            self.references.prefetch(next_task)
        if not self.waiting:
            self._started(ANY, self.start_any())

    def _started(self, key: tuple[str, str, str], worker: WorkerProcess) -> None:
        worker.start_request("ready", {"device": False})  # answered once its CPU part is done
        self.waiting.append((key, worker))

    def to_device(self) -> None:
        """The next item's spare's device part, asked for when the current item's timing is over."""
        if self.waiting and self.waiting[0][1].outstanding == ["ready"]:
            try:
                self.waiting[0][1].start_request("ready", {"device": True})
            except WorkerFailure:  # it died: its item starts its own
                self._drop(self.waiting[0])
        self.references.to_device()

    def await_ready(self) -> None:
        """The barrier before timing on a CPU machine: every spare has finished its start (and load ahead).
        (On a GPU the judge does not wait: the spares' work so far touches no GPU.) A spare that failed to
        start is closed; its item starts its own."""
        for spare in list(self.waiting):
            if spare[1].pending is not None:
                try:
                    spare[1].finish_all(self.timeout)
                except WorkerFailure:
                    self._drop(spare)
        self.references.await_spare()
        self.references.await_blank()

    def take(self, task: Task, candidate: Candidate) -> tuple[WorkerProcess, str]:
        """The worker for (task, candidate) and how it started: the spare started for it ("spare"), for any
        candidate ("spare_any") or for another one that was not judged next ("spare_other"), or a fresh one.

        Items come in the order their spares were started, so the oldest spare, when none is this pair's, was
        started for an item that was skipped or deselected. It learns its candidate's folders at ``load``, so it
        serves this one, unless it preloaded a library that read the other's folders at import (numba)."""
        for spare in [s for s in self.waiting if s[1].proc.poll() is not None]:  # died while it waited
            self._drop(spare)
        for i, (key, _) in enumerate(self.waiting):
            if key == spare_key(task, candidate):
                return self.waiting.pop(i)[1], "spare"
        if not self.waiting:
            return self.start(task, candidate), "fresh"
        key, worker = self.waiting.pop(0)
        if key == ANY:
            return worker, "spare_any"
        if not FOLDERS_READ_AT_IMPORT.intersection(worker.preload):
            with open(worker.log_path, "a") as log:  # its log is named for the candidate it was started for
                log.write(f"--- started for another candidate, judges {task.id} {candidate.name} ---\n")
            return worker, "spare_other"
        worker.close()
        return self.start(task, candidate), "fresh"

    def _drop(self, spare: tuple[tuple[str, str, str], WorkerProcess]) -> None:
        self.waiting.remove(spare)
        spare[1].close()

    def close(self) -> None:
        for _, worker in self.waiting:
            worker.close()
        self.waiting = []
