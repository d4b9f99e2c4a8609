"""Judging on a Ray cluster (``--cudal1-ray=ADDRESS``): one actor per GPU, each an isolated judge.

After collection the controller (the pytest process) queues every selected item's job; one thread
per actor feeds it jobs, and each item waits for its own result, so the actors judge at once while
pytest reports in order. An actor runs the same ``Judge`` a local run does, with its own build pool
and worker processes on its node: candidate code runs only in those workers, never in the actor or
here. Actors write nothing shared: the controller alone appends to the ledger (``JudgedItem.runtest``,
once per item) and writes the report.

A job whose actor or node dies goes back to the queue for any live actor, at most ``MAX_ATTEMPTS``
times; a crashed actor restarts on its node (up to ``MAX_RESTARTS`` times), one on a lost node is
retired. Only the result the controller receives is recorded, so nothing is lost or recorded twice.
Every GPU node gets one actor per GPU (``num_gpus=1``: Ray sets its CUDA_VISIBLE_DEVICES); a cluster
without GPUs gets CPU actors, one per ``CORES_PER_CPU_JUDGE`` CPUs of a node. Each node needs the same
pytest-cudal1 and torch installed. Ray is imported only here, and only when the option is given.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import os
import threading
from pathlib import Path
from typing import Any, Callable

from kernelbench.loaders import Task
from pytest_cudal1.builds import BuildPool, build_workers
from pytest_cudal1.candidates import Candidate
from pytest_cudal1.judge import Judge, JudgeConfig
from pytest_cudal1.records import JudgedRecord

MAX_ATTEMPTS = 3  # runs of one job, counting the first; a job that killed this many actors is an error
MAX_RESTARTS = 2  # restarts of one crashed actor on its node
RESTART_WAIT_S = 300.0  # how long a restarting actor may take to answer again (a fresh interpreter and torch)
CORES_PER_CPU_JUDGE = 2  # a CPU judge keeps two processes busy: the reference worker and the candidate's


class RayJudgeError(RuntimeError):
    """A job could not be judged on the cluster (no live actor, or it killed MAX_ATTEMPTS of them)."""


@dataclasses.dataclass(frozen=True)
class ActorPlan:
    node_id: str
    gpu: bool
    build_workers: int


def plan_actors(nodes: list[dict[str, Any]]) -> list[ActorPlan]:
    """One actor per GPU of every live GPU node; without GPUs, CPU actors on every live node."""
    alive = [n for n in nodes if n.get("Alive")]
    gpu_nodes = [n for n in alive if n["Resources"].get("GPU", 0) >= 1]
    plans: list[ActorPlan] = []
    for node in gpu_nodes or alive:
        cpus = int(node["Resources"].get("CPU", 1))
        count = int(node["Resources"]["GPU"]) if gpu_nodes else max(1, cpus // CORES_PER_CPU_JUDGE)
        plans += [ActorPlan(node["NodeID"], bool(gpu_nodes), build_workers(count, cpus))] * count
    return plans


class JudgeActor:
    """One isolated judge on one node: the ``Judge`` of a local run, its builds sized to its share of the node."""

    def __init__(self, cfg: JudgeConfig, workers: int, threads: str | None) -> None:
        from pytest_cudal1 import environment

        if threads is None:  # Ray sets 1 for its workers; the judge's own workers get what a local run gets
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = threads
        cfg = dataclasses.replace(cfg, workdir=_usable(cfg.workdir))
        arch = environment.gpu_facts().get("compute_capability")
        self.judge = Judge(cfg, BuildPool(cfg.workdir, cfg.compile_timeout, arch, workers), environment.has_gpu())

    def where(self) -> dict[str, Any]:
        """Host, pid and GPU of this actor (an answer also says it is alive)."""
        import platform

        return {"host": platform.node(), "pid": os.getpid(), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "build_workers": self.judge.builds.workers}

    def judge_one(self, task: Task, candidate: Candidate) -> JudgedRecord:
        return self.judge.judge(task, candidate)

    def close(self) -> None:
        self.judge.close()


def _usable(workdir: Path) -> Path:
    """The controller's cache folder where this node can write it, else one in the node's home."""
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        return workdir
    except OSError:
        return Path.home() / ".cache" / "pytest-cudal1"


@dataclasses.dataclass
class _Job:
    nodeid: str
    task: Task
    candidate: Candidate
    future: concurrent.futures.Future[JudgedRecord] = dataclasses.field(default_factory=concurrent.futures.Future)
    attempts: int = 0


class RayJudge:
    """The controller's side: actors on the cluster at ``address``, a queue of jobs, a result per item."""

    def __init__(self, address: str, cfg: JudgeConfig, say: Callable[[str], None]) -> None:
        import logging

        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.say = say
        self.events: list[str] = []  # re-queued and failed jobs, for the terminal summary
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        plans = plan_actors(ray.nodes())
        if not plans:
            raise RayJudgeError(f"the Ray cluster at {address} has no live node")
        remote = ray.remote(JudgeActor)
        threads = os.environ.get("OMP_NUM_THREADS")
        self.actors = [remote.options(num_cpus=0, num_gpus=1 if p.gpu else 0, max_restarts=MAX_RESTARTS,
                                      max_task_retries=0,
                                      scheduling_strategy=NodeAffinitySchedulingStrategy(p.node_id, soft=False))
                       .remote(cfg, p.build_workers, threads) for p in plans]
        self.where = ray.get([a.where.remote() for a in self.actors], timeout=RESTART_WAIT_S)
        kind = "GPU" if plans[0].gpu else "CPU"
        hosts = sorted({w["host"] for w in self.where})
        say(f"ray: {len(self.actors)} {kind} judge actor(s) on {len(hosts)} node(s) ({', '.join(hosts)}) at {address}")
        self.jobs: collections.deque[_Job] = collections.deque()
        self.results: dict[str, concurrent.futures.Future[JudgedRecord]] = {}
        self.cond = threading.Condition()
        self.closed = False
        self.live = len(self.actors)
        self.threads = [threading.Thread(target=self._serve, args=(a,), daemon=True, name=f"cudal1-ray-{i}")
                        for i, a in enumerate(self.actors)]

    def submit(self, jobs: list[tuple[str, Task, Candidate]]) -> None:
        """Queue every item's job (in pytest's order) and start feeding the actors."""
        with self.cond:
            for nodeid, task, candidate in jobs:
                # The controller's file path means nothing on another node: the actor builds from the source.
                job = _Job(nodeid, task, dataclasses.replace(candidate, path=None))
                self.jobs.append(job)
                self.results[nodeid] = job.future
        for thread in self.threads:
            thread.start()

    def result(self, nodeid: str) -> JudgedRecord:
        """Wait for the item's record; raises ``RayJudgeError`` when it could not be judged."""
        return self.results[nodeid].result()

    def _next(self, last_task: str | None) -> _Job | None:
        """The next job, one of the actor's last task first (it keeps that reference worker); None when all are done."""
        with self.cond:
            while not self.closed:
                if self.jobs:
                    same = next((j for j in self.jobs if j.task.sha256 == last_task), None)
                    job = same or self.jobs[0]
                    self.jobs.remove(job)
                    return job
                if all(f.done() for f in self.results.values()):
                    return None
                self.cond.wait()
            return None

    def _finish(self, job: _Job, record: JudgedRecord | None = None, error: Exception | None = None) -> None:
        with self.cond:
            if error is None:
                job.future.set_result(record)
            else:
                job.future.set_exception(error)
            self.cond.notify_all()

    def _serve(self, actor: Any) -> None:
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        last_task: str | None = None
        while (job := self._next(last_task)) is not None:
            job.attempts += 1
            try:
                record = ray.get(actor.judge_one.remote(job.task, job.candidate))
            except RayActorError as exc:
                self._requeue(job, exc)
                try:
                    ray.get(actor.where.remote(), timeout=RESTART_WAIT_S)  # restarted on its node?
                    continue
                except (RayActorError, GetTimeoutError):
                    self._retire()
                    return
            except RayTaskError as exc:  # the judge itself raised: a harness error, not the candidate's
                self._finish(job, error=RayJudgeError(f"{job.nodeid}: the judge raised on the cluster: {exc}"))
                continue
            last_task = job.task.sha256
            self._finish(job, record)

    def _requeue(self, job: _Job, exc: Exception) -> None:
        why = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        if job.attempts >= MAX_ATTEMPTS:
            self._note(f"{job.nodeid}: its judge actor died {job.attempts} times ({why}); not judged")
            self._finish(job, error=RayJudgeError(f"{job.nodeid}: judge actor died {job.attempts} times; last: {why}"))
            return
        self._note(f"{job.nodeid}: judge actor died ({type(exc).__name__}); job re-queued "
                   f"(attempt {job.attempts + 1} of {MAX_ATTEMPTS})")
        with self.cond:
            self.jobs.appendleft(job)
            self.cond.notify_all()

    def _retire(self) -> None:
        """An actor that will not come back; with none left, every queued job fails with the reason."""
        with self.cond:
            self.live -= 1
            if self.live > 0:
                return
            stranded, self.jobs = list(self.jobs), collections.deque()
        self._note("no live judge actor left on the cluster")
        for job in stranded:
            self._finish(job, error=RayJudgeError(f"{job.nodeid}: no live judge actor left on the cluster"))

    def _note(self, text: str) -> None:
        with self.cond:
            self.events.append(text)

    def close(self) -> None:
        """Drop queued jobs, end every actor's workers, then the actors; disconnect."""
        import ray

        with self.cond:
            self.closed = True
            self.jobs.clear()
            self.cond.notify_all()
        try:
            ray.get([a.close.remote() for a in self.actors], timeout=60)
        except Exception:  # noqa: BLE001 - an actor already gone has nothing left to close
            pass
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        ray.shutdown()
