"""Judge one (task, candidate) pair: build, check on hypothesis-drawn inputs, time in pairs.

Runs in the controller (the pytest process), which never imports candidate code:
it moves data between the trusted reference worker and the untrusted candidate
worker and decides from that data. Mode policy, applied to both models alike
in correctness and timing: ``eval()`` mode under ``torch.no_grad()`` (as
CUDA-L1's checker does), so dropout is off and batch norm uses running stats.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import re
import time
from pathlib import Path
from typing import Any, Callable

from kernelbench.loaders import Task
from pytest_cudal1 import environment
from pytest_cudal1.allowances import GlobalScreen
from pytest_cudal1.builds import BuildPool
from pytest_cudal1.candidates import GPU_ONLY_BACKENDS, Candidate
from pytest_cudal1.reasons import Reason
from pytest_cudal1.recipes import Recipe, recipe_strategy
from pytest_cudal1.seeds import KeyedRandom, derived, draw_judge_seed
from pytest_cudal1.records import JudgedRecord, PairedTiming, Verdict
from pytest_cudal1.reward import measured, reward_for
from pytest_cudal1.static_scan import scan
from pytest_cudal1.timing import AuditFailure, TimingConfig, call_measure_on_cpu, measure_pairs, pool_runs
from pytest_cudal1.workers.process import WorkerFailure, WorkerProcess

CPU_ONLY_BACKENDS = ("cpp",)
# Trials hypothesis may spend shrinking a failing recipe to a minimal one (fewest mixed regions and
# outliers, the plainest family and scale) before the smallest failure found is the verdict.
SHRINK_TRIALS = 12
VALUE_MISMATCHES = (Reason.WRONG_OUTPUT, Reason.PRECISION_LOSS, Reason.NONFINITE_MISMATCH, Reason.SHAPE_MISMATCH,
                    Reason.DTYPE_MISMATCH, Reason.DEVICE_MISMATCH, Reason.STRUCTURE_MISMATCH)


@dataclasses.dataclass
class JudgeConfig:
    seed: int
    workdir: Path
    trials: int = 5
    call_timeout: float = 60.0
    compile_timeout: float = 600.0
    timing: TimingConfig = dataclasses.field(default_factory=TimingConfig)
    custom_kernels_only: bool = False
    peak_bandwidth_gbs: float | None = None  # None: measured on the GPU, no floor on the CPU
    remeasure_above: float = 10.0
    timing_processes: int = 1  # worker-process pairs each candidate is timed in (``timing.pool_runs``)
    # Seed of recipes, timing inputs, pair order and audits (``seeds``); None: drawn per item after the build.
    judge_seed: int | None = None
    allow_global: frozenset[str] = frozenset()  # algorithm-selection settings a candidate may change (``allowances``)
    speedup: str = "kernel"  # the measure the reward is taken from (``reward.MEASURES``); both are recorded


class ReferencePool:
    """One trusted reference worker per task, reused by consecutive candidates of that task."""

    def __init__(self, cfg: JudgeConfig) -> None:
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
        self.worker = _claim(spare, task.sha256) or self._start(task)
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


def _claim(spare: tuple[Any, WorkerProcess] | None, key: Any) -> WorkerProcess | None:
    """The spare worker if it was started for ``key`` and still runs; any other spare is closed."""
    if spare is None:
        return None
    if spare[0] == key and spare[1].proc.poll() is None:
        return spare[1]
    spare[1].close()
    return None


class _Mismatch(Exception):
    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict


class _Fatal(Exception):
    def __init__(self, failure: WorkerFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class Judge:
    """Holds what outlives one item: the reference pool and the build pool."""

    def __init__(self, cfg: JudgeConfig, builds: BuildPool, gpu: bool,
                 on_phase: Callable[[str, JudgedRecord, bool], None] | None = None) -> None:
        self.cfg = cfg
        self.builds = builds
        self.gpu = gpu
        self.on_phase = on_phase  # told (phase, record, ended) for progress on the terminal
        self.references = ReferencePool(cfg)
        self._bandwidth: float | None = None
        self._output_bytes: int | None = 0  # None: the reference returns views of its inputs
        self._digests: dict[tuple[float, ...], tuple[float, ...]] = {}  # candidate digest -> reference digest
        self._allowed: set[str] = set()  # flags the reference raised on itself in trials: legal for the candidate
        self._spare: tuple[tuple[str, str], WorkerProcess] | None = None  # started early for the next item

    def close(self) -> None:
        """End every worker and the build pool (end of session)."""
        self.references.close()
        if self._spare is not None:
            self._spare[1].close()
            self._spare = None
        self.builds.shutdown()

    def _start_worker(self, task: Task, candidate: Candidate) -> WorkerProcess:
        safe = f"{task.id}-{candidate.name}".replace("/", "_")
        return WorkerProcess("candidate", self.cfg.workdir / "logs" / f"candidate-{safe}.log",
                             env=self.builds.env(candidate, self.gpu), cwd=str(self.builds.build_dir(candidate)))

    def _prefetch(self, upcoming: tuple[Task, Candidate] | None) -> None:
        """Start the next item's workers (interpreter, torch, CUDA context: seconds each) while this one ends.

        Called after timing, so the start-up never overlaps a measurement. The worker imports no
        candidate code until its own item sends ``load``.
        """
        if upcoming is None or self._spare is not None or self.unavailable(upcoming[1]) is not None:
            return
        task, candidate = upcoming
        self.references.prefetch(task)
        self._spare = ((task.id, candidate.sha256), self._start_worker(task, candidate))

    def _take_worker(self, task: Task, candidate: Candidate) -> WorkerProcess:
        spare, self._spare = self._spare, None
        return _claim(spare, (task.id, candidate.sha256)) or self._start_worker(task, candidate)

    def unavailable(self, candidate: Candidate) -> str | None:
        """Why this machine cannot run the candidate's backend, or None."""
        backend = candidate.backend
        if backend in GPU_ONLY_BACKENDS and not self.gpu:
            return f"backend {backend!r} needs a CUDA GPU and none is visible"
        if backend in CPU_ONLY_BACKENDS and self.gpu:
            return f"backend {backend!r} builds a CPU-only extension; inputs live on the GPU here"
        for backend_name, module in (("triton", "triton"), ("numba", "numba"), ("cupy", "cupy")):
            if backend == backend_name:
                import importlib.util

                if importlib.util.find_spec(module) is None:
                    return f"backend {backend!r} needs the {module!r} package, which is not installed"
        return None

    def judge(self, task: Task, candidate: Candidate, upcoming: tuple[Task, Candidate] | None = None) -> JudgedRecord:
        """Judge one pair; ``upcoming`` (the next pair) lets its worker start while this one finishes."""
        record = JudgedRecord(
            task_id=task.id, level=task.level, problem_id=task.problem_id, task_name=task.name,
            candidate_name=candidate.name, candidate_sha256=candidate.sha256, candidate_origin=candidate.origin,
            backend=candidate.backend, device="cuda" if self.gpu else "cpu", verdict=Verdict(Reason.OK),
            seed=self.cfg.seed, environment=environment.describe(), task_sha256=task.sha256,
        )
        record.static_findings = scan(candidate.source)
        self._output_bytes, self._digests, self._allowed = 0, {}, set()
        why = self.unavailable(candidate)
        if why:
            record.verdict = Verdict(Reason.BACKEND_UNAVAILABLE, why)
            return record
        phase = _Phases(record, self.on_phase)
        screen = GlobalScreen(self.cfg.allow_global)
        build = self.builds.result(candidate, self.gpu, task)
        phase("build_wait")
        record.compile_s = build.seconds
        if build.reason is not Reason.OK:
            record.verdict = Verdict(build.reason, build.message, {"log_tail": build.log_tail})
            return record
        try:
            reference = self.references.get(task)
            phase("reference_start")
        except WorkerFailure as exc:
            self.references.close_current()
            if exc.reason is Reason.REFERENCE_TOO_LARGE:  # a harness error: no reward, not the candidate's
                record.verdict = Verdict(exc.reason, exc.message, exc.evidence)
                return record
            reason = Reason.BAD_TASK if exc.reason in (Reason.SYNTAX_ERROR, Reason.RUNTIME_ERROR) else Reason.REFERENCE_ERROR
            record.verdict = Verdict(reason, f"reference for {task.id}: {exc.message}", exc.evidence)
            return record
        worker = self._take_worker(task, candidate)
        try:
            record.verdict = self._run(task, candidate, reference, worker, record, phase, screen,
                                       lambda: self._prefetch(upcoming))
        finally:
            worker.close()
            self._prefetch(upcoming)
        record.global_flags_set = sorted(screen.accepted)
        record.reward_measure = self.cfg.speedup
        record.reward = reward_for(record.verdict, measured(record, self.cfg.speedup))
        return record

    def _run(self, task: Task, candidate: Candidate, reference: WorkerProcess, worker: WorkerProcess,
             record: JudgedRecord, phase: "_Phases", screen: GlobalScreen,
             after_timing: Callable[[], None]) -> Verdict:
        cfg = self.cfg
        bad = self._load(worker, candidate, record, screen, reference, phase)
        if bad is not None:
            return self._with_memory(bad, reference, worker)
        # Drawn now, after ModelNew is built: nothing the candidate's process holds follows from it.
        record.judge_seed = secret = draw_judge_seed() if cfg.judge_seed is None else cfg.judge_seed
        bad = self._check_trials(task, reference, worker, record, secret)
        phase("trials")
        if bad is not None:
            return self._with_memory(bad, reference, worker)

        if not self.gpu:
            phase.begin("build_wait")
            self.builds.wait_idle()  # compilers never share the cores with a CPU measurement
        phase("build_wait")  # booked as waiting, never as timing
        pairs, replica_strays = [(reference, worker)], []
        # Started together, so their interpreters and CUDA contexts come up side by side.
        replicas = [self._start_worker(task, candidate) for _ in range(1, cfg.timing_processes)]
        try:
            base_seed = derived(secret, "timing-base")
            input_nbytes = self._prepare_timing(reference, worker, base_seed)
            for i, replica in enumerate(replicas, start=1):
                pairs.append((self.references.replica(task, i), replica))
                bad = self._load(replica, candidate, record, screen, pairs[-1][0])
                if bad is not None:
                    return Verdict(bad.reason, f"in timing process pair {i + 1}: {bad.message}", bad.evidence)
                self._prepare_timing(*pairs[-1], base_seed)
            rng = KeyedRandom(secret, "timing")
            record.timing = self._measure(pairs, rng, "kernel")
            floor = None if self._output_bytes is None else self._floor_ms(input_nbytes + self._output_bytes)
            if floor is not None and record.timing.candidate.median_ms < floor:
                return Verdict(Reason.BELOW_ROOFLINE,
                               f"candidate took {record.timing.candidate.median_ms:.4g} ms; moving its inputs and "
                               f"outputs once at {self._bandwidth:.4g} GB/s takes {floor:.4g} ms",
                               {"floor_ms": floor, "candidate_ms": record.timing.candidate.median_ms,
                                "bandwidth_gbs": self._bandwidth})
            record.timing, bad = self._remeasured(record.timing, pairs, rng, "kernel")
            if bad is not None:
                return bad
            if self.gpu:
                record.call_timing, bad = self._remeasured(self._measure(pairs, rng, "call"), pairs, rng, "call")
                if bad is not None:
                    return bad
            else:
                record.call_timing = call_measure_on_cpu(record.timing)
            phase("timing")
            after_timing()
            record.peak_memory_bytes = worker.request("peak_memory", None, cfg.call_timeout)
            record.kernels = worker.request("profile", None, cfg.call_timeout)
            phase("profile")
        except AuditFailure as exc:
            v = exc.verdict
            return Verdict(v.reason, f"pair {exc.pair}: {v.message}", {**v.evidence, "pair": exc.pair})
        except WorkerFailure as exc:
            return self._with_memory(Verdict(exc.reason, f"while timing: {exc.message}", exc.evidence), reference, worker)
        finally:
            self._release_timing([ref for ref, _ in pairs])
            for replica in replicas:
                replica_strays += replica.strays()
                replica.close()
        strays = worker.strays() + replica_strays
        if strays:
            return Verdict(Reason.DEFERRED_WORK, f"process(es) {strays[:5]} escaped the worker's process group and "
                           "were still running after judging (killed)", {"pids": strays})
        if cfg.custom_kernels_only and self.gpu and not custom_kernels(record.kernels):
            return Verdict(Reason.LIBRARY_ONLY, f"only library kernels ran: {', '.join(record.kernels[:6])}",
                           {"kernels": record.kernels})
        return Verdict(Reason.OK, f"correct on {cfg.trials} trials; speedup {record.timing.speedup:.3f}x")

    def _load(self, worker: WorkerProcess, candidate: Candidate, record: JudgedRecord, screen: GlobalScreen,
              reference: WorkerProcess, phase: Callable[[str], None] = lambda _: None) -> Verdict | None:
        """Import the candidate in its worker, build its ModelNew and warm it up; a verdict if that failed.

        From here on every reply's flags pass ``screen``: the settings the user allowed are dropped.
        Construction and the warm-up call get the compile timeout: ``load_inline`` in ``__init__``
        and ``torch.compile`` at the first call compile there (a cached build makes both quick).
        """
        cfg = self.cfg
        worker.screen = screen
        try:
            loaded = worker.request("load", {"path": self.builds.source_path(candidate),
                                             "module_name": self.builds.module_name(candidate)}, cfg.compile_timeout)
        except WorkerFailure as exc:
            return Verdict(_compile_reason(exc, Reason.IMPORT_ERROR), exc.message, exc.evidence)
        phase("candidate_import")
        if not record.compile_s:  # lazily compiling backends, and cached builds: the import is the cost
            record.compile_s = loaded["import_s"]
        if loaded["flags"]:
            return _flag_verdict(loaded["flags"], "at import")
        if not loaded["has_modelnew"]:
            return Verdict(Reason.NO_MODELNEW, f"{candidate.origin} defines no class ModelNew")
        try:
            built = worker.request("build", {"init_inputs": self.references.init_inputs, "seed": cfg.seed},
                                   cfg.compile_timeout)
        except WorkerFailure as exc:
            return Verdict(_compile_reason(exc, Reason.INIT_ERROR), exc.message, exc.evidence)
        if built["flags"]:
            return _flag_verdict(built["flags"], "in ModelNew.__init__")
        phase("candidate_init")
        bad = self._warm_up(reference, worker, record)
        phase("warm_up")
        return bad

    def _warm_up(self, reference: WorkerProcess, worker: WorkerProcess, record: JudgedRecord) -> Verdict | None:
        """One unchecked first call on task inputs of their own, before any checked one.

        Lazy compilation (``torch.compile``, Triton autotuning) and the pools it starts happen
        here, under the compile timeout, not in the first trial under the call timeout. Its
        values are not checked; its inputs are drawn for it alone, so nothing it computes
        answers a trial, and a later call that returns its buffer or its values is OUTPUT_REPLAY.
        Global settings and tampering are checked as after every call.
        """
        cfg = self.cfg
        try:
            recipe = Recipe(seed=cfg.seed ^ WARM_UP_SEED, family="task", scale=1.0)
            ref = reference.request("trial", {"recipe": dataclasses.asdict(recipe)}, cfg.call_timeout * 4)
            inputs = reference.request("inputs", None, cfg.call_timeout, raw=True)
        except WorkerFailure as exc:
            self.references.close_current()
            return Verdict(Reason.REFERENCE_ERROR, f"reference failed on the warm-up inputs: {exc.message}",
                           exc.evidence)
        try:
            warmed = worker.request("warm_up", {"inputs": inputs, "poison": ref["output_nbytes"]}, cfg.compile_timeout)
        except WorkerFailure as exc:
            return Verdict(_compile_reason(exc, exc.reason), f"in the warm-up call: {exc.message}", exc.evidence)
        if record.first_call_ms is None:  # replicas warm up too
            record.first_call_ms = warmed["call_ms"]
        # A later call returning these values replays them.
        self._replayed(warmed["fingerprint"], ref["fingerprint"], ref["rounding"], ref["rounding_floor"])
        return _flag_verdict(warmed["flags"], "in the warm-up call") if warmed["flags"] else None

    def _prepare_timing(self, reference: WorkerProcess, worker: WorkerProcess, seed: int) -> int:
        """Both workers of a pair get the reference's timing inputs (drawn under ``seed``); returns their bytes."""
        timeout = self.cfg.call_timeout
        prepared = reference.request("prepare_timing", {"seed": seed}, timeout)
        worker.request("prepare_timing", {"inputs": reference.request("timing_base", None, timeout, raw=True),
                                          "allowed": sorted(self._allowed)}, timeout)
        return int(prepared["input_nbytes"])

    def _release_timing(self, references: list[WorkerProcess]) -> None:
        """The kept reference workers free their timing buffers; one that fails is replaced, never blamed on
        the candidate."""
        for reference in references:
            if reference.proc.poll() is not None:  # closed after failing a check: nothing left to free
                continue
            try:
                reference.request("release_timing", None, self.cfg.call_timeout)
            except WorkerFailure:
                self.references.close_current()
                return

    def _remeasured(self, first: PairedTiming, pairs: list[tuple[WorkerProcess, WorkerProcess]], rng: random.Random,
                    measure: str) -> tuple[PairedTiming, Verdict | None]:
        """One measure's timing, re-measured when its speedup is above ``remeasure_above``: the lower of the
        two counts, and two that disagree (``reproduced``) are a SPEEDUP_NOT_REPRODUCED verdict."""
        if first.speedup <= self.cfg.remeasure_above:
            return first, None
        again = self._measure(pairs, rng, measure)
        if not reproduced(first, again):
            return first, Verdict(Reason.SPEEDUP_NOT_REPRODUCED,
                                  f"{measure} speedup {first.speedup:.2f}x {_ci(first)}, then {again.speedup:.2f}x "
                                  f"{_ci(again)} when re-measured",
                                  {"measure": measure, "first": first.speedup, "second": again.speedup,
                                   "first_ci": first.speedup_ci, "second_ci": again.speedup_ci})
        return min(first, again, key=lambda t: t.speedup), None  # the lower one counts

    def _measure(self, pairs: list[tuple[WorkerProcess, WorkerProcess]], rng: random.Random,
                 measure: str = "kernel") -> PairedTiming:
        """Paired timing in each pair of workers, the time budget shared; several runs are pooled.

        Each measure gets the whole budget. The placements leave twice the reference's own peak
        (beyond its inputs) free for the candidate."""
        cfg = dataclasses.replace(self.cfg.timing, budget_s=self.cfg.timing.budget_s / len(pairs), measure=measure,
                                  reserve_bytes=HEADROOM_FACTOR * self.references.call_peak)
        runs = [measure_pairs(ref, cand, cfg, rng, functools.partial(self._check, ref, cand, "timed"),
                              dict(self._digests)) for ref, cand in pairs]
        return runs[0] if len(runs) == 1 else pool_runs(runs, random.Random(rng.getrandbits(64)))

    def _replayed(self, cand_fp: Any, ref_fp: Any, rounding: float, floor: float) -> str | None:
        """Did the candidate return the values of an earlier trial whose reference differed beyond rounding?

        Where the reference's output is rounding noise around an exact value, its digest changes between
        trials while an honest candidate's (the exact value, or noise of its own) need not: two reference
        outputs within the rounding model of each other are the same answer.
        """
        from pytest_cudal1.timing import digest_key, fingerprints_match

        if cand_fp is None:
            return None
        ck, rk = digest_key(cand_fp), digest_key(ref_fp)
        earlier = self._digests.setdefault(ck, rk)  # keep the first: hypothesis replays a failing trial
        if earlier != rk and not fingerprints_match(_digest_of(earlier, ref_fp), ref_fp, rounding, floor):
            return "returned the values of an earlier trial made on different inputs"
        return None

    def _check(self, reference: WorkerProcess, worker: WorkerProcess, against: str) -> Verdict | None:
        """The candidate's last outputs, relayed undecoded to the reference worker, compared there.

        The comparison runs on the reference's device, where the float64 reference already is; the
        controller only forwards bytes. A failure inside the reference while checking is named as such.
        """
        outputs = worker.request("output", None, self.cfg.call_timeout, raw=True)
        try:
            bad = reference.request("check", {"outputs": outputs, "against": against}, self.cfg.call_timeout * 4)
        except WorkerFailure as exc:
            self.references.close_current()
            raise WorkerFailure(Reason.REFERENCE_ERROR, f"checking the candidate's output failed in the reference "
                                f"worker: {exc.message}", exc.evidence) from None
        return None if bad is None else Verdict(Reason(bad["reason"]), bad["message"], bad["evidence"])

    def _with_memory(self, verdict: Verdict, reference: WorkerProcess, worker: WorkerProcess) -> Verdict:
        """An OUT_OF_MEMORY verdict, with what the harness held and what the candidate asked for."""
        if verdict.reason is not Reason.OUT_OF_MEMORY:
            return verdict
        held = {}
        for role, w in (("reference", reference), ("candidate", worker)):
            try:
                held[role] = w.request("memory", None, self.cfg.call_timeout) if w.proc.poll() is None else None
            except WorkerFailure:
                held[role] = None
        asked = asked_bytes(verdict.message)
        evidence = {**verdict.evidence, "harness_held": held, "candidate_asked_bytes": asked,
                    "headroom_bytes": HEADROOM_FACTOR * self.references.call_peak}
        return Verdict(verdict.reason, f"{verdict.message} | {memory_message(held, asked, evidence['headroom_bytes'])}",
                       evidence)

    def _floor_ms(self, moved_bytes: int) -> float | None:
        """Bytes that must move (inputs read once, outputs written once) at peak bandwidth."""
        if self._bandwidth is None:
            self._bandwidth = self.cfg.peak_bandwidth_gbs
            if self._bandwidth is None and self.gpu and self.references.worker is not None:
                self._bandwidth = self.references.worker.request("bandwidth", None, self.cfg.call_timeout)
        if not self._bandwidth:
            return None
        return moved_bytes / (self._bandwidth * 1e9) * 1e3

    def _check_trials(self, task: Task, reference: WorkerProcess, worker: WorkerProcess,
                      record: JudgedRecord, secret: int) -> Verdict | None:
        """Correctness on hypothesis-drawn recipes; the task's own distribution always runs first.

        A mixed recipe (one region of another family, sparse outliers) always runs second: a candidate
        that peeks at a few elements and skips work on the task's own distribution meets it on every
        run, not only when hypothesis happens to draw a mixed recipe (about half its draws). Recipes
        follow from the judge seed ``secret``, never from the seed the models were built under.
        """
        from hypothesis import HealthCheck, Phase, Verbosity, example, given, reject, settings
        from hypothesis import seed as hypothesis_seed
        from hypothesis.errors import Flaky, Unsatisfiable

        cfg = self.cfg
        fatal: list[WorkerFailure] = []
        failed: dict[Recipe, _Mismatch] = {}  # what each failing recipe gave, for shrinking past its budget
        runs = 0

        @hypothesis_seed(derived(secret, "recipes"))
        @settings(max_examples=max(cfg.trials - 2, 1), database=None, deadline=None, derandomize=False,
                  phases=[Phase.explicit, Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck),
                  report_multiple_bugs=False, print_blob=False, verbosity=Verbosity.quiet)
        @example(Recipe(seed=derived(secret, "task-trial"), family="task", scale=1.0))
        @example(Recipe(seed=derived(secret, "mixed-trial"), family="mixed", scale=1.0, regions=1, outliers=1))
        @given(recipe_strategy())
        def trial(recipe: Recipe) -> None:
            nonlocal runs
            if fatal:
                raise _Fatal(fatal[0])
            runs += 1
            if runs > cfg.trials + SHRINK_TRIALS:  # shrinking stops here: recipes already run give their result
                if recipe in failed:
                    raise failed[recipe]
                reject()
            try:
                ref = reference.request("trial", {"recipe": dataclasses.asdict(recipe)}, cfg.call_timeout * 4)
                inputs = reference.request("inputs", None, cfg.call_timeout, raw=True)
            except WorkerFailure as exc:
                fatal.append(WorkerFailure(Reason.REFERENCE_ERROR, f"reference failed on {recipe}: {exc.message}",
                                           exc.evidence))
                raise _Fatal(fatal[0]) from None
            if recipe.family != "task" and ref["nonfinite"]:
                reject()
            # A reference that returns a view of its inputs moves no bytes: no floor then.
            self._output_bytes = None if ref["aliases_input"] else sum(ref["output_nbytes"])
            self._allowed |= {code for code, legal in (("OUTPUT_ALIASES_INPUT", ref["aliases_input"]),
                                                       ("INPUT_MUTATED", ref["mutates_input"])) if legal}
            repeats = 2 if recipe.family == "task" else 1  # the task's own inputs run twice: races show
            for attempt in range(repeats):
                try:
                    got = worker.request("run", {"inputs": inputs, "poison": ref["output_nbytes"]}, cfg.call_timeout)
                except WorkerFailure as exc:
                    fatal.append(exc)
                    raise _Fatal(exc) from None
                flags = [f for f in got["flags"] if f["code"] not in self._allowed]
                replayed = self._replayed(got["fingerprint"], ref["fingerprint"], ref["rounding"], ref["rounding_floor"])
                if replayed:  # after the worker's own flags: a deferred write can also look like a replay
                    flags.append({"code": "OUTPUT_REPLAY", "detail": replayed})
                try:
                    bad = _flag_verdict(flags, f"on {recipe}") if flags else self._check(reference, worker, "trial")
                except WorkerFailure as exc:
                    fatal.append(exc)
                    raise _Fatal(exc) from None
                if bad is not None and attempt == 1 and not flags:  # a flag names its own cheat
                    bad = Verdict(Reason.NONDETERMINISTIC, f"correct once, then on the same inputs: {bad.message}",
                                  {**bad.evidence, "first_reason": bad.reason.value})
                if bad is not None:
                    bad.evidence["recipe"] = str(recipe)
                    bad.evidence["float64_reference"] = ref["float64"]
                    bad.message = f"{bad.message} [{recipe}]"
                    failed[recipe] = _Mismatch(bad)
                    raise failed[recipe]

        try:
            trial()
        except _Mismatch as exc:
            return exc.verdict
        except _Fatal as exc:
            if exc.failure.reason is Reason.REFERENCE_ERROR:
                self.references.close_current()
            return Verdict(exc.failure.reason, exc.failure.message, exc.failure.evidence)
        except Flaky as exc:
            # A stateful cheat (e.g. a pointer-keyed cache) fails once and passes on hypothesis' replay:
            # the first failure, if a check named it, is the verdict; a value mismatch that vanished is a race.
            first = next((e.verdict for e in getattr(exc, "exceptions", ()) if isinstance(e, _Mismatch)), None)
            if first is not None and first.reason not in VALUE_MISMATCHES:
                return first
            return Verdict(Reason.NONDETERMINISTIC, f"the same recipe failed differently on a re-run: {exc}",
                           {"detail": str(exc)[:2000], "first_failure": first.message if first else None})
        except Unsatisfiable:
            pass  # every drawn family was invalid for this task; the task's own inputs still ran
        return None


LIBRARY_KERNEL_MARKERS = ("cublas", "cutlass", "cudnn", "gemm", "gemv", "xmma", "at::native", "void at::",
                          "cub::", "triton_poi", "triton_red", "triton_per", "memcpy", "memset", "nchw", "implicit_convolve")


class _Phases:
    """Wall-clock seconds of each judging phase, into ``record.phase_s``: where an item's time goes.

    A phase met twice (``build_wait``: the candidate's own build, then on the CPU every other build
    before timing) adds up.
    """

    def __init__(self, record: JudgedRecord, notify: Callable[[str, JudgedRecord, bool], None] | None = None) -> None:
        self.record = record
        self.notify = notify
        self.last = time.perf_counter()

    def begin(self, name: str) -> None:
        """Announce a phase that may be long (nothing is booked)."""
        if self.notify is not None:
            self.notify(name, self.record, False)

    def __call__(self, name: str) -> None:
        """The phase ``name`` ended now."""
        now = time.perf_counter()
        self.record.phase_s[name] = round(self.record.phase_s.get(name, 0.0) + now - self.last, 3)
        self.last = now
        if self.notify is not None:
            self.notify(name, self.record, True)


# Two measurements of one speedup agree within this factor. Not tighter: between runs on a GPU a noisy
# reference drifts by more than one run's interval (H200: an honest LayerNorm at 15.2x, then 11.8x).
REPRODUCE_FACTOR = 1.5


def reproduced(first: PairedTiming, second: PairedTiming) -> bool:
    """Two measurements agree: within ``REPRODUCE_FACTOR`` of each other, or with overlapping 95% intervals."""
    low, high = sorted((first.speedup, second.speedup))
    if high <= REPRODUCE_FACTOR * low:
        return True
    return first.speedup_ci[0] <= second.speedup_ci[1] and second.speedup_ci[0] <= first.speedup_ci[1]


# While timing, the harness leaves this many times the reference's own peak memory (beyond its inputs)
# free for the candidate (``runtime.placements_fitting``).
HEADROOM_FACTOR = 2


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def too_large_message(task: Task, probe: dict[str, Any]) -> str:
    """Why the reference cannot run here, with how much memory the task needs (``ReferenceWorker.probe``)."""
    where = "device" if str(probe.get("device", "")).startswith("cuda") else "host"
    text = (f"the reference of {task.id} cannot run on this machine: the task needs about {gb(probe['need_bytes'])} "
            f"of {where} memory ({gb(probe['input_bytes'])} of inputs, {gb(probe['output_bytes'])} of outputs, held "
            f"several times over by its first trial) and {gb(probe['available_bytes'])} is available")
    if probe.get("oom"):
        text += f"; its first trial, run alone before any candidate, ran out of memory ({probe['oom'][:200]})"
    return text + "; a harness error, not the candidate's: skipped, no reward"


_ASKED = (re.compile(r"[Tt]ried to allocate ([\d.]+) ?([KMGT]i?B)"), re.compile(r"tried to allocate (\d+) bytes"))
_UNITS = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}


def asked_bytes(message: str) -> int | None:
    """The allocation an out-of-memory message names (torch's CUDA and CPU allocators' wording), or None."""
    m = _ASKED[0].search(message)
    if m:
        return int(float(m[1]) * _UNITS[m[2]])
    m = _ASKED[1].search(message)
    return int(m[1]) if m else None


def memory_message(held: dict[str, dict[str, int] | None], asked: int | None, headroom: int) -> str:
    """What the harness held when the candidate ran out of memory, and what the candidate asked for."""
    ref, cand = held.get("reference"), held.get("candidate")
    parts = [f"the candidate asked for {gb(asked)}" if asked is not None else "the candidate's request size is unknown"]
    if ref is not None:
        parts.append(f"the harness's reference worker held {gb(ref['held_bytes'])} "
                     f"({gb(ref['timing_bytes'])} of it timing buffers)")
    if cand is not None:
        parts.append(f"the harness's timing buffers in the candidate's worker held {gb(cand['timing_bytes'])} "
                     f"(that worker held {gb(cand['held_bytes'])} in all)")
    parts.append(f"the headroom left for the candidate while timing: {gb(headroom)}")
    return "; ".join(parts)


def _ci(t: PairedTiming) -> str:
    return f"[{t.speedup_ci[0]:.2f}, {t.speedup_ci[1]:.2f}]"


def custom_kernels(kernels: list[str]) -> list[str]:
    """Kernels that are not library or PyTorch kernels (names from the profiler)."""
    return [k for k in kernels if not any(m in k.lower() for m in LIBRARY_KERNEL_MARKERS)]


def _digest_of(key: tuple[float, ...], like: list[list[float]]) -> list[list[float]]:
    """``timing.digest_key``'s flat form back in the per-tensor shape of ``like``."""
    out, i = [], 0
    for t in like:
        out.append(list(key[i:i + len(t)]))
        i += len(t)
    return out if i == len(key) else []


WARM_UP_SEED = 0x5741524D  # the warm-up's inputs differ from every trial's


def _compile_reason(exc: WorkerFailure, otherwise: Reason) -> Reason:
    """A step under the compile timeout that ran past it is COMPILE_TIMEOUT; a Python error is ``otherwise``."""
    if exc.reason is Reason.TIMEOUT:
        return Reason.COMPILE_TIMEOUT
    return otherwise if exc.reason is Reason.RUNTIME_ERROR else exc.reason


def _flag_verdict(flags: list[dict[str, str]], when: str) -> Verdict:
    """The first flag a worker raised becomes the verdict; the others go into the evidence."""
    first = flags[0]
    return Verdict(Reason(first["code"]), f"{first['detail']} ({when})", {"flags": flags})
