"""Correctness trials: the candidate against the float64 reference on hypothesis-drawn input recipes.

The task's own inputs run first (twice: races show), a mixed recipe second, then
hypothesis' draws; a failure is shrunk to the smallest recipe that still fails,
within ``SHRINK_TRIALS`` more runs.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from kernelbench.loaders import Task
from pytest_cudal1.messages import flag_verdict
from pytest_cudal1.reasons import Reason
from pytest_cudal1.recipes import Recipe, recipe_strategy
from pytest_cudal1.records import JudgedRecord, Verdict
from pytest_cudal1.seeds import derived
from pytest_cudal1.workers.process import WorkerFailure, WorkerProcess

if TYPE_CHECKING:
    from pytest_cudal1.judge import Judge

# Trials hypothesis may spend shrinking a failing recipe to a minimal one (fewest mixed regions and
# outliers, the plainest family and scale) before the smallest failure found is the verdict.
SHRINK_TRIALS = 12
VALUE_MISMATCHES = (Reason.WRONG_OUTPUT, Reason.PRECISION_LOSS, Reason.NONFINITE_MISMATCH, Reason.SHAPE_MISMATCH,
                    Reason.DTYPE_MISMATCH, Reason.DEVICE_MISMATCH, Reason.STRUCTURE_MISMATCH)


class Mismatch(Exception):
    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict


class Fatal(Exception):
    def __init__(self, failure: WorkerFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def run_call(worker: WorkerProcess, body: dict, timeout: float, record: JudgedRecord, allowed: set[str]) -> dict:
    """One checked call. A flag that a single slow synchronize can raise (``statistical``: the host
    descheduled, another process's context on the GPU) stands only if the same call on the same inputs
    raises it again: work a candidate leaves on a side stream is there on every call, noise is not.
    Any other flag (``allowed`` aside) is a verdict at once."""
    got = worker.request("run", body, timeout)
    counted = [f for f in got["flags"] if f["code"] not in allowed]
    noisy = [f["detail"] for f in counted if f.get("statistical")]
    if not noisy or len(noisy) < len(counted):
        return got
    again = worker.request("run", body, timeout)
    if any(f.get("statistical") for f in again["flags"]):
        for f in again["flags"]:
            if f.get("statistical"):
                f["detail"] += f"; the call before it, on the same inputs, too: {'; '.join(noisy)}"
    else:
        record.warnings.append(f"checked twice: the first call's finding did not repeat ({'; '.join(noisy)})")
    return again


def check_trials(judge: "Judge", task: Task, reference: WorkerProcess, worker: WorkerProcess,
                 record: JudgedRecord, secret: int) -> Verdict | None:
    """Correctness on hypothesis-drawn recipes; the task's own distribution always runs first.

    A mixed recipe (one region of another family, sparse outliers) always runs second: a candidate
    that peeks at a few elements and skips work on the task's own distribution meets it on every
    run, not only when hypothesis happens to draw a mixed recipe (about half its draws). Recipes
    follow from ``secret`` (the task's trial seed for this run, ``Judge.trial_secret``), never from
    the seed the models were built under; so the task's candidates meet the same recipes and the
    reference worker serves the ones it computed before (``record.trials_cached`` counts them).
    """
    from hypothesis import HealthCheck, Phase, Verbosity, example, given, reject, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis.errors import Flaky, Unsatisfiable

    cfg = judge.cfg
    fatal: list[WorkerFailure] = []
    failed: dict[Recipe, Mismatch] = {}  # what each failing recipe gave, for shrinking past its budget
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
            raise Fatal(fatal[0])
        runs += 1
        if runs > cfg.trials + SHRINK_TRIALS:  # shrinking stops here: recipes already run give their result
            if recipe in failed:
                raise failed[recipe]
            reject()
        try:
            ref = reference.request("trial", {"recipe": dataclasses.asdict(recipe), "reuse": not cfg.fresh_trials},
                                    cfg.call_timeout * 4)
            inputs = reference.request("inputs", None, cfg.call_timeout, raw=True)
        except WorkerFailure as exc:
            fatal.append(WorkerFailure(Reason.REFERENCE_ERROR, f"reference failed on {recipe}: {exc.message}",
                                       exc.evidence))
            raise Fatal(fatal[0]) from None
        record.trials_cached += bool(ref["cached"])
        if recipe.family != "task" and ref["nonfinite"]:
            reject()
        # A reference that returns a view of its inputs moves no bytes: no floor then.
        judge.output_bytes = None if ref["aliases_input"] else sum(ref["output_nbytes"])
        judge.allowed |= {code for code, legal in (("OUTPUT_ALIASES_INPUT", ref["aliases_input"]),
                                                   ("INPUT_MUTATED", ref["mutates_input"])) if legal}
        repeats = 2 if recipe.family == "task" else 1  # the task's own inputs run twice: races show
        for attempt in range(repeats):
            try:
                got = run_call(worker, {"inputs": inputs, "poison": ref["output_nbytes"]}, cfg.call_timeout, record,
                               judge.allowed)
            except WorkerFailure as exc:
                fatal.append(exc)
                raise Fatal(exc) from None
            flags = [f for f in got["flags"] if f["code"] not in judge.allowed]
            replayed = judge.replayed(got["fingerprint"], ref["fingerprint"], ref["rounding"], ref["rounding_floor"])
            if replayed:  # after the worker's own flags: a deferred write can also look like a replay
                flags.append(replayed)
            try:
                bad = flag_verdict(flags, f"on {recipe}") if flags else judge.check(reference, worker, "trial")
            except WorkerFailure as exc:
                fatal.append(exc)
                raise Fatal(exc) from None
            if bad is not None and attempt == 1 and not flags:  # a flag names its own cheat
                bad = Verdict(Reason.NONDETERMINISTIC, f"correct once, then on the same inputs: {bad.message}",
                              {**bad.evidence, "first_reason": bad.reason.value})
            if bad is not None:
                bad.evidence["recipe"] = str(recipe)
                bad.evidence["float64_reference"] = ref["float64"]
                bad.message = f"{bad.message} [{recipe}]"
                failed[recipe] = Mismatch(bad)
                raise failed[recipe]

    try:
        trial()
    except Mismatch as exc:
        return exc.verdict
    except Fatal as exc:
        if exc.failure.reason is Reason.REFERENCE_ERROR:
            judge.references.close_current()
        return Verdict(exc.failure.reason, exc.failure.message, exc.failure.evidence)
    except Flaky as exc:
        # A stateful cheat (e.g. a pointer-keyed cache) fails once and passes on hypothesis' replay:
        # the first failure, if a check named it, is the verdict; a value mismatch that vanished is a race.
        first = next((e.verdict for e in getattr(exc, "exceptions", ()) if isinstance(e, Mismatch)), None)
        if first is not None and first.reason not in VALUE_MISMATCHES:
            return first
        return Verdict(Reason.NONDETERMINISTIC, f"the same recipe failed differently on a re-run: {exc}",
                       {"detail": str(exc)[:2000], "first_failure": first.message if first else None})
    except Unsatisfiable:
        pass  # every drawn family was invalid for this task; the task's own inputs still ran
    return None
