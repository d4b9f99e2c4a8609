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
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from kernelbench.loaders import Task
from pytest_cudal1 import environment
from pytest_cudal1.allowances import GlobalScreen
from pytest_cudal1.builds import BuildPool
from pytest_cudal1.candidates import GPU_ONLY_BACKENDS, PRELOADED_ALWAYS, Candidate, preloaded
from pytest_cudal1.messages import asked_bytes, compile_reason, flag_verdict, interval_text, memory_message
from pytest_cudal1.reasons import Reason
from pytest_cudal1.recipes import Recipe
from pytest_cudal1.references import ReferencePool
from pytest_cudal1.seeds import KeyedRandom, derived, draw_judge_seed, task_seed
from pytest_cudal1.records import JudgedRecord, PairedTiming, Verdict
from pytest_cudal1.reward import measured, reward_for
from pytest_cudal1.spares import Spares
from pytest_cudal1.static_scan import scan
from pytest_cudal1.timing import AuditFailure, TimingConfig, call_measure_on_cpu, confirmed, measure_pairs
from pytest_cudal1.timing_stats import pool_runs
from pytest_cudal1.trials import check_trials
from pytest_cudal1.workers.process import Closing, WorkerFailure, WorkerProcess

CPU_ONLY_BACKENDS = ("cpp",)


@dataclasses.dataclass
class JudgeConfig:
    seed: int
    workdir: Path
    trials: int = 5
    call_timeout: float = 60.0
    compile_timeout: float = 600.0
    timing: TimingConfig = dataclasses.field(default_factory=TimingConfig)
    custom_kernels_only: bool = False
    list_kernels: bool = True  # the profiled call after timing (``record.kernels``); its first use costs seconds
    peak_bandwidth_gbs: float | None = None  # None: measured on the GPU, no floor on the CPU
    remeasure_above: float = 10.0
    timing_processes: int = 1  # worker-process pairs each candidate is timed in (``timing_stats.pool_runs``)
    # Seed of timing inputs, pair order and audits (``seeds``), and of the tasks' trial seeds; None: drawn per
    # item after the build (trial seeds: per task, ``Judge.trial_secret``).
    judge_seed: int | None = None
    allow_global: frozenset[str] = frozenset()  # algorithm-selection settings a candidate may change (``allowances``)
    speedup: str = "kernel"  # the measure the reward is taken from (``reward.MEASURES``); both are recorded
    call_measure: bool = True  # on a GPU, also time the call measure (``--cudal1-no-call-measure``: kernel only)
    # Every candidate gets trial recipes of its own and the reference recomputes them (``--cudal1-fresh-trials``).
    fresh_trials: bool = False
    lookahead: int = 1  # items ahead whose workers start while one is judged (``--cudal1-lookahead``)


class Judge:
    """Holds what outlives one item: the reference pool and the build pool."""

    def __init__(self, cfg: JudgeConfig, builds: BuildPool, gpu: bool,
                 on_phase: Callable[[str, JudgedRecord, bool], None] | None = None) -> None:
        self.cfg = cfg
        self.builds = builds
        self.gpu = gpu
        self.on_phase = on_phase  # told (phase, record, ended) for progress on the terminal
        self.closing = Closing()  # workers of items judged, asked to exit: reaped before the next one's calls
        depth = max(1, cfg.lookahead)
        self.references = ReferencePool(cfg, self.closing, blanks=depth)
        self._bandwidth: float | None = None
        self.output_bytes: int | None = 0  # None: the reference returns views of its inputs
        self.digests: dict[tuple[Any, ...], list[list[Any]]] = {}  # candidate output's key -> the reference's digest
        self.allowed: set[str] = set()  # flags the reference raised on itself in trials: legal for the candidate
        self.spares = Spares(self._start_worker, self._start_any_worker, self.references,
                             cfg.compile_timeout, depth)  # for the next items
        self._any_started = 0  # workers started for any candidate (their log files' numbers)
        self._trial_secrets: dict[str, int] = {}  # task sha256 -> seed of its trial recipes this run; never recorded

    def close(self) -> None:
        """End every worker and the build pool (end of session)."""
        self.references.close()
        self.spares.close()
        self.closing.reap()
        self.builds.shutdown()

    def _start_worker(self, task: Task, candidate: Candidate) -> WorkerProcess:
        safe = f"{task.id}-{candidate.name}".replace("/", "_")
        return WorkerProcess("candidate", self.cfg.workdir / "logs" / f"candidate-{safe}.log",
                             env=self.builds.env(candidate, self.gpu), cwd=str(self.builds.build_dir(candidate)),
                             preload=preloaded(candidate.backend))

    def _start_any_worker(self) -> WorkerProcess:
        """A candidate worker for whichever candidate comes next: it learns that one's folders at ``load``."""
        self._any_started += 1
        return WorkerProcess("candidate", self.cfg.workdir / "logs" / f"candidate-next-{self._any_started}.log",
                             env=self.builds.common_env(self.gpu), cwd=str(self.cfg.workdir), preload=PRELOADED_ALWAYS)

    def prefetch(self, upcoming: Sequence[tuple[Task, Candidate]] = (), next_task: Task | None = None,
                 more: bool = False) -> None:
        """Start the next items' workers (``spares``, the pairs in the order they will be judged): at collection
        for the first items, and once an item's reference is probed for those after it (the free memory the
        probe reads is taken with only this item's workers up). With no next pair known, ``next_task``'s
        reference, and with ``more`` (candidates will follow, their code not written yet) a candidate worker
        for whichever comes."""
        if upcoming:
            self.spares.prefetch([pair for pair in upcoming if self.unavailable(pair[1]) is None])
        elif more:
            self.spares.prefetch_any(next_task)
        elif next_task is not None:
            self.references.prefetch(next_task)

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

    def judge(self, task: Task, candidate: Candidate, upcoming: Sequence[tuple[Task, Candidate]] = (),
              next_task: Task | None = None, more: bool = False) -> JudgedRecord:
        """Judge one pair; ``upcoming`` (the next pairs, in order) lets their workers start while this one
        finishes, and without one, ``next_task`` (the optimizer's next task, its candidates not written yet) its
        reference and ``more`` (more candidates will come) a worker for whichever candidate is next."""
        record = JudgedRecord(
            task_id=task.id, level=task.level, problem_id=task.problem_id, task_name=task.name,
            candidate_name=candidate.name, candidate_sha256=candidate.sha256, candidate_origin=candidate.origin,
            backend=candidate.backend, device="cuda" if self.gpu else "cpu", verdict=Verdict(Reason.OK),
            seed=self.cfg.seed, environment=environment.describe(), task_sha256=task.sha256,
        )
        record.static_findings = scan(candidate.source)
        self.output_bytes, self.digests, self.allowed = 0, {}, set()
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
        # The spare started for it, or a fresh one, which starts while the reference loads.
        worker, record.warm_start["candidate"] = self.spares.take(task, candidate)
        try:
            try:
                reference = self.references.get(task)
                phase("reference_start")
            except WorkerFailure as exc:
                self.references.close_current()
                if not exc.reason.judged:  # a harness error (memory, a stateful task): no reward, not the candidate's
                    record.verdict = Verdict(exc.reason, exc.message, exc.evidence)
                    return record
                reason = Reason.BAD_TASK if exc.reason in (Reason.SYNTAX_ERROR, Reason.RUNTIME_ERROR) else Reason.REFERENCE_ERROR
                record.verdict = Verdict(reason, f"reference for {task.id}: {exc.message}", exc.evidence)
                return record
            finally:
                record.warm_start["reference"] = self.references.start
                if self.references.start_s:
                    record.warm_start["reference_s"] = self.references.start_s
            self.prefetch(upcoming, next_task, more)
            record.verdict = self._run(task, candidate, reference, worker, record, phase, screen)
        finally:
            # Both end while the next item starts: this worker, and the reference when the next task is another.
            self.closing.add(worker)
            following = upcoming[0][0] if upcoming else next_task
            if following is not None and following.sha256 != task.sha256:
                self.references.close_current(later=True)
            self.prefetch(upcoming, next_task, more)  # the item ended before its reference was up: start them now
            self.spares.to_device()  # an item that ended before timing asks for it here
        record.global_flags_set = sorted(screen.accepted)
        record.reward_measure = self.cfg.speedup
        record.reward = reward_for(record.verdict, measured(record, self.cfg.speedup))
        return record

    def _run(self, task: Task, candidate: Candidate, reference: WorkerProcess, worker: WorkerProcess,
             record: JudgedRecord, phase: "_Phases", screen: GlobalScreen) -> Verdict:
        cfg = self.cfg
        bad = self._load(worker, candidate, record, screen, reference, phase)
        if bad is not None:
            return self._with_memory(bad, reference, worker)
        # Drawn now, after ModelNew is built: nothing the candidate's process holds follows from it.
        record.judge_seed = secret = draw_judge_seed() if cfg.judge_seed is None else cfg.judge_seed
        self.closing.reap()  # the last item's workers: not beside this candidate's calls, nor its memory
        phase("teardown_wait")
        bad = check_trials(self, task, reference, worker, record, self.trial_secret(task, secret))
        phase("trials")
        if bad is not None:
            return self._with_memory(bad, reference, worker)

        if not self.gpu:  # compilers and start-ups never share the cores with a CPU measurement
            phase.begin("build_wait")
            self.builds.wait_idle()
            phase("build_wait")  # booked as waiting, never as timing
            self.spares.await_ready()
            phase("spare_wait")
        phase.begin("timing")
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
            floor = None if self.output_bytes is None else self._floor_ms(input_nbytes + self.output_bytes)
            if floor is not None and record.timing.candidate.median_ms < floor:
                return Verdict(Reason.BELOW_ROOFLINE,
                               f"candidate took {record.timing.candidate.median_ms:.4g} ms; moving its inputs and "
                               f"outputs once at {self._bandwidth:.4g} GB/s takes {floor:.4g} ms",
                               {"floor_ms": floor, "candidate_ms": record.timing.candidate.median_ms,
                                "bandwidth_gbs": self._bandwidth})
            record.timing, bad = self._remeasured(record.timing, pairs, rng, "kernel")
            if bad is not None:
                return bad
            if not self.gpu:
                record.call_timing = call_measure_on_cpu(record.timing)
            elif cfg.call_measure:
                record.call_timing, bad = self._remeasured(self._measure(pairs, rng, "call"), pairs, rng, "call")
                if bad is not None:
                    return bad
            phase("timing")
            # Nothing is timed from here on: the next item's workers take their device part (CUDA context, the
            # reference's models and rounding) while this one's kernels are listed and its workers close.
            self.spares.to_device()
            record.peak_memory_bytes = worker.request("peak_memory", None, cfg.call_timeout)
            record.kernels = worker.request("profile", None, cfg.call_timeout) if cfg.list_kernels else []
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
        unbuilt = "".join(map(_unbuilt, record.extension_failures))
        return Verdict(Reason.OK, f"correct on {cfg.trials} trials; speedup {record.timing.speedup:.3f}x{unbuilt}")

    def trial_secret(self, task: Task, secret: int) -> int:
        """The seed of ``task``'s trial recipes: one per task for the whole run, so the reference worker's
        computed trials serve every candidate of it (``--cudal1-fresh-trials``: the item's own ``secret``).

        Drawn when the task is first judged here and never written anywhere a candidate could read it:
        a later candidate could read the ledger (``judge_seed`` stays the item's own seed)."""
        if self.cfg.fresh_trials:
            return secret
        if task.sha256 not in self._trial_secrets:
            self._trial_secrets[task.sha256] = task_seed(self.cfg.judge_seed, task.sha256)
        return self._trial_secrets[task.sha256]

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
            # A spare's warm start was asked for while another item ran; a fresh worker's is waited for here,
            # and so is the device part of a spare that was never asked for it.
            warm = worker.finish_all(cfg.compile_timeout)
            if warm is None or (self.gpu and not warm["cuda_context"]):
                warm = worker.request("ready", {"device": True}, cfg.compile_timeout)
            record.warm_start.setdefault("preloaded", warm["preloaded"])
            loaded = worker.request("load", {"path": self.builds.source_path(candidate),
                                             "module_name": self.builds.module_name(candidate),
                                             "env": self.builds.folders(candidate),
                                             "cwd": str(self.builds.build_dir(candidate))}, cfg.compile_timeout)
        except WorkerFailure as exc:
            return Verdict(compile_reason(exc, Reason.IMPORT_ERROR), exc.message, exc.evidence)
        phase("candidate_import")
        record.extension_failures = loaded["extension_failures"]
        if not record.compile_s:  # lazily compiling backends, and cached builds: the import is the cost
            record.compile_s = loaded["import_s"]
        if loaded["flags"]:
            return flag_verdict(loaded["flags"], "at import")
        if not loaded["has_modelnew"]:
            return Verdict(Reason.NO_MODELNEW, f"{candidate.origin} defines no class ModelNew")
        try:
            built = worker.request("build", {"init_inputs": self.references.init_inputs, "seed": cfg.seed},
                                   cfg.compile_timeout)
        except WorkerFailure as exc:
            return Verdict(compile_reason(exc, Reason.INIT_ERROR), exc.message, exc.evidence)
        record.extension_failures = built["extension_failures"]
        if built["flags"]:
            return flag_verdict(built["flags"], "in ModelNew.__init__")
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
            return Verdict(compile_reason(exc, exc.reason), f"in the warm-up call: {exc.message}", exc.evidence)
        if record.first_call_ms is None:  # replicas warm up too
            record.first_call_ms = warmed["call_ms"]
        # A later call returning these values replays them.
        self.replayed(warmed["fingerprint"], ref["fingerprint"], ref["rounding"], ref["rounding_floor"])
        return flag_verdict(warmed["flags"], "in the warm-up call") if warmed["flags"] else None

    def _prepare_timing(self, reference: WorkerProcess, worker: WorkerProcess, seed: int) -> int:
        """Both workers of a pair get the reference's timing inputs (drawn under ``seed``); returns their bytes."""
        timeout = self.cfg.call_timeout
        prepared = reference.request("prepare_timing", {"seed": seed}, timeout)
        worker.request("prepare_timing", {"inputs": reference.request("timing_base", None, timeout, raw=True),
                                          "allowed": sorted(self.allowed)}, timeout)
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
                                  f"{measure} speedup {first.speedup:.2f}x {interval_text(first)}, then {again.speedup:.2f}x "
                                  f"{interval_text(again)} when re-measured",
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
        runs = [confirmed(functools.partial(measure_pairs, ref, cand, cfg, rng,
                                            functools.partial(self.check, ref, cand, "timed"), dict(self.digests)))
                for ref, cand in pairs]
        return runs[0] if len(runs) == 1 else pool_runs(runs, random.Random(rng.getrandbits(64)))

    def replayed(self, cand_fp: Any, ref_fp: Any, rounding: float, floor: float) -> dict[str, str] | None:
        """A flag (``{"code", "detail"}``) when the candidate returned the values of an earlier trial whose
        reference differed beyond rounding, or sent a malformed digest.

        Where the reference's output is rounding noise around an exact value, its digest changes between
        trials while an honest candidate's (the exact value, or noise of its own) need not: two reference
        outputs within the rounding model of each other are the same answer.
        """
        from pytest_cudal1.call_checks import digest_key, fingerprints_match, well_formed

        if cand_fp is None:
            return None
        if not well_formed(cand_fp, ref_fp):
            return {"code": Reason.PROTOCOL_VIOLATION.value, "detail": "a malformed output digest"}
        # The first kept: hypothesis replays a failing trial.
        earlier = self.digests.setdefault(digest_key(cand_fp), ref_fp)
        if digest_key(earlier) != digest_key(ref_fp) and not fingerprints_match(earlier, ref_fp, rounding, floor):
            return {"code": Reason.OUTPUT_REPLAY.value,
                    "detail": "returned the values of an earlier trial made on different inputs"}
        return None

    def check(self, reference: WorkerProcess, worker: WorkerProcess, against: str) -> Verdict | None:
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
        """An OUT_OF_MEMORY verdict, with what the harness held and what the failing worker asked for; the
        reference's own failure beside a candidate that kept to its headroom is a harness error instead."""
        if verdict.reason is not Reason.OUT_OF_MEMORY:
            return verdict
        held = {}
        for role, w in (("reference", reference), ("candidate", worker)):
            try:
                held[role] = w.request("memory", None, self.cfg.call_timeout) if w.proc.poll() is None else None
            except WorkerFailure:
                held[role] = None
        asked = asked_bytes(verdict.message)
        headroom = HEADROOM_FACTOR * self.references.call_peak
        asker = str(verdict.evidence.get("worker", "candidate"))
        evidence = {**verdict.evidence, "harness_held": held, f"{asker}_asked_bytes": asked, "headroom_bytes": headroom}
        message = f"{verdict.message} | {memory_message(held, asked, headroom, asker)}"
        own = {role: h["held_bytes"] - h["timing_bytes"] for role, h in held.items() if h}
        if asker == "reference" and len(own) == 2 and own["candidate"] <= own["reference"] + headroom:
            # The reference failed beside a candidate holding no more than the reference does itself plus its
            # headroom: the machine is too small for this task as judged, not the candidate's fault (the H200
            # named an honest 6.4 GB graph wrapper OUT_OF_MEMORY so).
            return Verdict(Reason.REFERENCE_TOO_LARGE, f"the reference ran out of memory beside a candidate within "
                           f"its headroom: {message}", evidence)
        return Verdict(verdict.reason, message, evidence)

    def _floor_ms(self, moved_bytes: int) -> float | None:
        """Bytes that must move (inputs read once, outputs written once) at peak bandwidth."""
        if self._bandwidth is None:
            self._bandwidth = self.cfg.peak_bandwidth_gbs
            if self._bandwidth is None and self.gpu and self.references.worker is not None:
                self._bandwidth = self.references.worker.request("bandwidth", None, self.cfg.call_timeout)
        if not self._bandwidth:
            return None
        return moved_bytes / (self._bandwidth * 1e9) * 1e3

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
# free for the candidate (``memory.placements_fitting``).
HEADROOM_FACTOR = 2


def _unbuilt(failure: dict[str, Any]) -> str:
    """An OK verdict's note of an extension that did not build (``workers.extension_failures``)."""
    tries = f", tried {failure['attempts']} times" if failure.get("attempts", 1) > 1 else ""
    return (f"; extension {failure['extension']!r} did not build ({failure['error']}{tries}), "
            "so what ran instead was judged")


def custom_kernels(kernels: list[str]) -> list[str]:
    """Kernels that are not library or PyTorch kernels (names from the profiler)."""
    return [k for k in kernels if not any(m in k.lower() for m in LIBRARY_KERNEL_MARKERS)]


WARM_UP_SEED = 0x5741524D  # the warm-up's inputs differ from every trial's


