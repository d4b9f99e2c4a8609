"""The timing engine's decision rules, on numbers measured on the H200, and its input sets on CPU tensors."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
import torch
from cudal1_helpers import candidate_source, read_ledger, run_pytest, task_source, write_candidate, write_task

from pytest_cudal1 import unreported
from pytest_cudal1.judge import reproduced
from pytest_cudal1.reasons import Reason
from pytest_cudal1.records import JudgedRecord, PairedTiming, TimingSummary, Verdict
from pytest_cudal1.timing import AuditFailure, _check_clocks, confirmed
from pytest_cudal1.timing_stats import counted_ms, device_ms, pool_runs, sample_ms, summarize, tail_ms
from pytest_cudal1.trials import run_call
from pytest_cudal1.workers import memory, timed_loop
from pytest_cudal1.workers.timed_loop import Flusher, TimedLoop, timed_sample
from pytest_cudal1.workers.timing_inputs import TimingInputs


def paired(speedup: float, ci: tuple[float, float]) -> PairedTiming:
    side = TimingSummary(median_ms=1.0, iqr_ms=0.0, min_ms=1.0, mean_ms=1.0, n=10, clock="cuda_event")
    return PairedTiming(side, side, speedup, ci, 10, "", "converged")


def test_drift_between_runs_reproduces_but_a_fourfold_drop_does_not() -> None:
    # The H200's honest LayerNorm in CuPy: 15.2x, then 11.8x, disjoint intervals.
    assert reproduced(paired(15.22, (13.64, 15.91)), paired(11.80, (11.12, 13.13)))
    assert not reproduced(paired(40.0, (38.0, 42.0)), paired(10.0, (9.5, 10.5)))


def test_one_delayed_sample_is_no_timer_mismatch() -> None:
    # (host - event, event) per call: one sample held back 0.4 ms by another process's kernels.
    cand = [(0.01, 0.24)] * 9 + [(0.40, 0.24)]
    ref = [(0.01, 2.7)] * 10
    _check_clocks({"candidate": cand, "reference": ref})


def test_a_host_clock_far_past_the_events_is_a_timer_mismatch() -> None:
    cand = [(0.60, 0.24)] * 10
    ref = [(0.01, 2.7)] * 10
    with pytest.raises(AuditFailure) as caught:
        _check_clocks({"candidate": cand, "reference": ref})
    assert caught.value.verdict.reason is Reason.TIMER_MISMATCH and caught.value.statistical
    assert "0.6 ms per call" in caught.value.verdict.message


FAR_PAST = {"candidate": [(0.60, 0.24)] * 10, "reference": [(0.01, 2.7)] * 10}  # the clock rule fails on these
ALIKE = {"candidate": [(0.01, 0.24)] * 10, "reference": [(0.01, 2.7)] * 10}


def runs_of(*gaps: dict[str, list[tuple[float, float]]]):
    """A measurement whose k-th run applies the real clock rule to ``gaps[k]``; counts its runs."""
    runs: list[int] = []

    def measure() -> PairedTiming:
        runs.append(1)
        _check_clocks(gaps[len(runs) - 1])
        return paired(1.0, (0.99, 1.01))
    return measure, runs


def test_a_statistical_audit_that_fails_once_is_measured_again_and_the_second_run_counts() -> None:
    # A loaded 2-core CPU: an honest run once saw 10.4 ms more per sample around the candidate (session 11).
    measure, runs = runs_of(FAR_PAST, ALIKE)
    timing = confirmed(measure)
    assert len(runs) == 2 and timing.speedup == 1.0
    assert any("measured twice" in w and "0.6 ms per call" in w for w in timing.warnings)
    assert timing.wall_s["discarded_run"] >= 0  # the first run's wall time is booked, not lost


def test_a_statistical_audit_that_fails_twice_stands_and_names_both_runs() -> None:
    measure, runs = runs_of(FAR_PAST, FAR_PAST)
    with pytest.raises(AuditFailure) as caught:
        confirmed(measure)
    assert len(runs) == 2 and caught.value.verdict.reason is Reason.TIMER_MISMATCH
    assert "the run before it too" in caught.value.verdict.message


def test_a_failed_check_on_the_outputs_is_never_measured_again() -> None:
    calls = []

    def measure() -> PairedTiming:
        calls.append(1)
        raise AuditFailure(Verdict(Reason.WRONG_OUTPUT, "timed call 2: digest differs"), 3)
    with pytest.raises(AuditFailure):
        confirmed(measure)
    assert len(calls) == 1


class ScriptedWorker:
    """Answers ``run`` with the flags given, one list per call: the rule in ``trials.run_call`` alone (a slow
    synchronize after an honest call cannot be caused on demand, on a CPU least of all)."""

    def __init__(self, *replies: list[dict]) -> None:
        self.replies, self.calls = list(replies), []

    def request(self, kind: str, body: dict, timeout: float) -> dict:
        self.calls.append((kind, body))
        return {"flags": self.replies.pop(0), "fingerprint": None}


TAIL = {"code": "STREAM_ESCAPE", "detail": "work on another stream ran 4.09 ms past the end", "statistical": True}
ALIAS = {"code": "OUTPUT_ALIASES_INPUT", "detail": "an output shares storage with an input"}


def _record() -> JudgedRecord:
    return JudgedRecord(task_id="L2/25", level=2, problem_id=25, task_name="t", candidate_name="c",
                        candidate_sha256="0", candidate_origin="", backend="torch", device="cuda",
                        verdict=Verdict(Reason.OK))


def test_a_slow_synchronize_once_in_a_trial_is_checked_again_and_the_second_call_counts() -> None:
    # H200, session 13: two of four copies of one honest L2/25 candidate, 4.09 and 4.12 ms (one scheduler tick).
    worker, record = ScriptedWorker([dict(TAIL)], []), _record()
    got = run_call(worker, {"inputs": [1]}, 1.0, record, set())
    assert got["flags"] == [] and [c[1] for c in worker.calls] == [{"inputs": [1]}] * 2
    assert record.warnings and "did not repeat" in record.warnings[0] and "4.09 ms" in record.warnings[0]


def test_a_slow_synchronize_on_both_calls_stands_and_names_both() -> None:
    worker, record = ScriptedWorker([dict(TAIL)], [dict(TAIL)]), _record()
    got = run_call(worker, {}, 1.0, record, set())
    assert [f["code"] for f in got["flags"]] == ["STREAM_ESCAPE"] and "the call before it" in got["flags"][0]["detail"]
    assert not record.warnings


def test_any_other_flag_beside_it_is_a_verdict_at_once_and_an_allowed_one_is_not_counted() -> None:
    worker = ScriptedWorker([dict(TAIL), ALIAS])
    assert len(run_call(worker, {}, 1.0, _record(), set())["flags"]) == 2 and len(worker.calls) == 1
    worker = ScriptedWorker([dict(TAIL), ALIAS], [ALIAS])  # the reference aliases too: only the tail counts
    assert run_call(worker, {}, 1.0, _record(), {"OUTPUT_ALIASES_INPUT"})["flags"] == [ALIAS]
    assert len(worker.calls) == 2


def test_the_reference_gap_is_the_yardstick() -> None:
    # A loaded machine: both sides' host clocks run 0.5 ms past their events.
    _check_clocks({"candidate": [(0.5, 0.1)] * 10, "reference": [(0.5, 0.2)] * 10})


def test_a_reference_whose_events_outlast_its_host_clock_grants_nothing_below_zero() -> None:
    # H200, the call measure: an eager reference's events ran 0.19 ms past its host clock, and a graph
    # wrapper's host clock 0.011 ms past its 0.124 ms of events was called a timer mismatch.
    _check_clocks({"candidate": [(0.0113, 0.1237)] * 10, "reference": [(-0.1886, 0.3)] * 10})
    with pytest.raises(AuditFailure):
        _check_clocks({"candidate": [(0.2, 0.1237)] * 10, "reference": [(-0.1886, 0.3)] * 10})


def test_a_few_late_wake_ups_are_not_counted_as_escaped_work() -> None:
    # (ms per call, escaped ms per sample), 40 calls per sample: 3 of 30 samples with a 60 us late tail.
    samples = [(0.0178, 0.0)] * 27 + [(0.0178, 0.06)] * 3
    assert counted_ms(samples, 40) == [0.0178] * 30


def test_work_escaping_in_most_samples_is_added_to_every_sample() -> None:
    samples = [(0.5, 2.0)] * 8 + [(0.5, 0.0)] * 2  # a side stream's 2 ms, seen in 8 of 10 samples
    assert counted_ms(samples, 1) == pytest.approx([2.5] * 10)


def test_the_counted_tail_is_reported_per_side_and_pooled() -> None:
    samples = [(0.5, 0.4)] * 6 + [(0.5, 0.0)] * 4  # 0.4 ms escaped in most samples of 4 calls each
    assert tail_ms(samples, 4) == pytest.approx(0.1)
    runs = []
    for tail in (0.1, 0.0, 0.3):
        side = summarize([0.6, 0.6, 0.6], "cuda_event", 4, tail)
        runs.append(PairedTiming(summarize([0.6, 0.6, 0.6], "cuda_event", 4), side, 1.0, (1.0, 1.0), 3, "m", "budget"))
    pooled = pool_runs(runs, random.Random(0))
    assert pooled.candidate.tail_ms == pytest.approx(0.1) and pooled.reference.tail_ms == 0.0


def test_a_sample_counts_the_hosts_queueing_time_when_it_is_longer_than_its_events() -> None:
    assert sample_ms({"event_ms": 2.7, "enqueue_ms": 0.05, "host_ms": 2.8}) == (2.7, "cuda_event")
    assert sample_ms({"event_ms": 0.1, "enqueue_ms": 0.8, "host_ms": 0.9}) == (0.8, "cuda_event")
    assert sample_ms({"event_ms": None, "enqueue_ms": None, "host_ms": 0.9}) == (0.9, "perf_counter")


def test_short_kernels_samples_are_sized_by_the_device_time_not_the_queueing() -> None:
    # H200: one eager 17 us call took ~85 us to queue; sized from that, samples held 10 calls, not ~48.
    assert device_ms({"event_ms": 0.017, "enqueue_ms": 0.085, "host_ms": 0.1}) == 0.017
    assert device_ms({"event_ms": None, "enqueue_ms": None, "host_ms": 0.1}) == 0.1


def test_fixed_input_sets_are_the_same_buffers_with_new_values() -> None:
    inputs = TimingInputs([torch.randn(64), 3], "cpu")
    first = [s[0].clone() for s in inputs.fixed(1, 4)]
    ptrs = [s[0].data_ptr() for s in inputs.fixed(2, 4)]
    again = inputs.fixed(2, 4)
    assert ptrs == [s[0].data_ptr() for s in again]  # what a captured graph reads
    assert all(s[1] == 3 for s in again)
    assert not any(torch.equal(a, s[0]) for a, s in zip(first, again))


def test_without_a_graph_the_loop_runs_eagerly_on_rotated_sets() -> None:
    calls = []
    loop = TimedLoop(lambda args: calls.append(args[0].data_ptr()) or args[0] * 2, TimingInputs([torch.ones(8)], "cpu"))
    loop.place(3, 2)
    run, graphed = loop.prepare(turn=0, calls=3, graph_wanted=True)
    outs = run()
    assert not graphed and len(outs) == 3 and len(set(calls)) == 3
    run2, _ = loop.prepare(turn=1, calls=3, graph_wanted=True)
    run2()
    assert not set(calls[3:]) & set(calls[:3])  # the next sample runs on sets of its own


def _eager_run(device: str, most: int, samples: int) -> tuple[int, set[int], set[int], int]:
    """Eager samples of one call each: the placements set up, the input and output addresses the samples
    saw, and how much the device memory reserved grew while they ran."""
    inputs, outputs = set(), set()

    def call(args: list[torch.Tensor]) -> torch.Tensor:
        inputs.add(args[0].data_ptr())
        return args[0] * 2

    loop, flush = TimedLoop(call, TimingInputs([torch.ones(1 << 20, device=device)], device)), Flusher(device)
    placements = loop.place(1, most)
    inputs.clear()  # the untimed passes' inputs
    reserved = torch.cuda.memory_reserved() if device == "cuda" else 0
    for turn in range(samples):
        _, outs = timed_sample(loop, turn, 1, device, flush)
        outputs.add(outs[0].data_ptr())
    grew = (torch.cuda.memory_reserved() if device == "cuda" else 0) - reserved
    return placements, inputs, outputs, grew


def test_eager_samples_rotate_among_placements_of_input_sets() -> None:
    placements, inputs, _, _ = _eager_run("cpu", 4, 12)
    assert placements == 4 and len(inputs) == 4


def test_placements_are_limited_by_free_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "PLACEMENT_MEMORY_SHARE", 1e-12)
    placements, inputs, _, _ = _eager_run("cpu", 4, 6)
    assert placements == 1 and len(inputs) == 1


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_eager_outputs_rotate_among_memory_pools_set_up_before_timing() -> None:
    # Freed and reallocated in one pool, every sample's output would land in the block the last one left.
    placements, inputs, outputs, grew = _eager_run("cuda", 4, 12)
    assert placements == 4 and len(inputs) == 4 and len(outputs) == 4
    assert grew == 0  # no cudaMalloc inside a timed region


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_host_work_done_while_the_gpu_holds_is_counted() -> None:
    # 0.5 ms of host work, then a tiny kernel: the hold (~1 ms) covers the work, so the events see only
    # the kernel; the host's queueing time is what the sample counts.
    def call(args: list[torch.Tensor]) -> torch.Tensor:
        until = time.perf_counter() + 5e-4
        while time.perf_counter() < until:
            pass
        return args[0] + 1

    loop, flush = TimedLoop(call, TimingInputs([torch.ones(1024, device="cuda")], "cuda")), Flusher("cuda")
    loop.place(1, 1)
    sample, _ = timed_sample(loop, 0, 1, "cuda", flush)
    assert sample["event_ms"] < 0.3 and sample["enqueue_ms"] >= 0.5
    assert sample_ms(sample)[0] == sample["enqueue_ms"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_call_measure_sample_times_each_call_in_a_region_of_its_own() -> None:
    """Without the hold (the ``call`` measure) each call of a sample is a region: ``before``, the flush and an idle
    GPU ahead of each. A call of 2 ms of host work and then a ~2 ms kernel: in one region of four calls each
    call's host work would overlap the kernel before it (~2.5 ms a call); a region each, host then kernel, ~4 ms."""
    befores = []

    def call(args: list[torch.Tensor]) -> torch.Tensor:
        until = time.perf_counter() + 2e-3
        while time.perf_counter() < until:
            pass
        torch.cuda._sleep(4_000_000)  # ~2 ms at 2 GHz
        return args[0] + 1

    loop, flush = TimedLoop(call, TimingInputs([torch.ones(1024, device="cuda")], "cuda")), Flusher("cuda")
    loop.place(4, 1)
    sample, outs = timed_sample(loop, 0, 4, "cuda", flush, before=lambda: befores.append(1), hold=False)
    assert len(outs) == 4 and len(befores) == 4 and sample["calls"] == 4
    assert 3.4 < sample["event_ms"] < 8 and 3.4 < sample["host_ms"] < 8, sample


def test_idle_samples_run_in_as_many_regions_as_the_candidates_calls() -> None:
    """The second yardstick of unreported time mirrors a ``call`` sample: what comes before each region runs
    between its parts, outside their time."""
    between = []
    sample = timed_loop.idle_sample(8.0, asleep=False, regions=4, between=lambda: (between.append(1), time.sleep(0.01)))
    assert len(between) == 4
    assert 8.0 <= sample["host_ms"] < 8.0 + 4 * 10.0 * 0.5  # the parts' 8 ms, not the 40 ms slept between them


# Disarms the tamper watch through ``gc`` (any code in the worker can) and reports a share of each sample's time:
# only the controller's clock around the request, outside the worker, can see what it hid.
def disarmed_forger(forward: str, divide: float | str) -> str:
    """``divide``: what the reported time is divided by, a number or a Python expression drawn per sample."""
    return candidate_source(header="""
import gc
import random
import sys
import types

from pytest_cudal1.workers import tamper, timed_loop

for obj in gc.get_objects():
    if isinstance(obj, tamper.TamperWatch):
        obj.objs = {}  # nothing left to compare

_real = timed_loop.timed_sample


def _forged(*args, **kwargs):
    sample, outs = _real(*args, **kwargs)
    return dict(sample, host_ms=sample["host_ms"] / (DIVIDE)), outs


_stand_in = types.ModuleType(timed_loop.__name__)
_stand_in.__dict__.update(vars(timed_loop))
_stand_in.timed_sample = _forged
sys.modules["__main__"].timed_loop = _stand_in
""".replace("DIVIDE", str(divide)), forward=forward)


def judged_alone(root: Path, task: str, forward: str, shape: str, name: str, source: str) -> dict:
    """The one record of ``source`` judged against a level-1 task ``task`` (``forward`` on inputs of ``shape``)."""
    write_task(root / "tasks", 1, task, task_source(forward=forward, shape=shape))
    write_candidate(root / "cands", 1, task, name, source)
    ledger = root / "ledger.jsonl"
    run_pytest(root, "--cudal1-trials=2", "--cudal1-seed=1", f"--cudal1-tasks={root / 'tasks'}",
               f"--cudal1-candidates={root / 'cands'}", f"--cudal1-ledger={ledger}",
               f"--cudal1-cache-dir={root / 'cache'}")
    [record] = read_ledger(ledger)
    return record


def test_a_timer_forged_past_a_disarmed_watch_is_a_timer_mismatch(tmp_path: Path) -> None:
    """A 768x768 matmul, ~16 ms a call on this CPU and little harness work around it, reported 100x faster.
    The old allowance (5 ms, or half the wall time of a sample) passed it as OK at ~100x."""
    record = judged_alone(tmp_path, "1_mm", "return x @ x", "768, 768", "forger", disarmed_forger("return x @ x", 100))
    verdict = record["verdict"]
    assert verdict["reason"] == "TIMER_MISMATCH", verdict
    assert verdict["evidence"]["unreported_ms"] > verdict["evidence"]["allowed_ms"]


def test_a_timer_forged_by_a_share_of_a_large_inputs_call_is_a_timer_mismatch(tmp_path: Path) -> None:
    """A relu of 16M elements (~7 ms a call) that reports half its time. Before the reference worker refilled the
    candidate's inputs (``TimingInputs.mirror``), the refill of 64 MB was inside the candidate's clocked request, and
    a quarter of that request's overhead (the allowance's share term) hid the forged half."""
    record = judged_alone(tmp_path, "1_relu", "return torch.relu(x)", "4096, 4096", "halver",
                          disarmed_forger("return torch.relu(x)", 2))
    verdict = record["verdict"]
    assert verdict["reason"] == "TIMER_MISMATCH", verdict
    assert verdict["evidence"]["unreported_ms"] > verdict["evidence"]["allowed_ms"]


def test_a_timer_forged_by_a_random_share_is_a_timer_mismatch(tmp_path: Path) -> None:
    """The same relu hiding a random share of each sample, up to 90% (45% in the middle). The differences' spread
    grew with what it hid: four standard errors of their median, taken from that spread, exceed the middle of a
    uniform spread below 14 pairs, and it passed as OK at 1.5-1.6x. The allowance's error is the reference's now."""
    record = judged_alone(tmp_path, "1_relu", "return torch.relu(x)", "4096, 4096", "jitterer",
                          disarmed_forger("return torch.relu(x)", "1 / (1 - 0.9 * random.random())"))
    verdict = record["verdict"]
    assert verdict["reason"] == "TIMER_MISMATCH", verdict
    assert verdict["evidence"]["unreported_ms"] > verdict["evidence"]["allowed_ms"]


def test_an_honest_candidate_far_slower_than_its_reference_is_ok(tmp_path: Path) -> None:
    """A relu that sleeps half a second first: 250 times its reference's sample. The harness's time after a sample
    grows with its length (its code runs cold): on this 2-core VM 3-6 ms around 3.5 s samples against 0.2-0.7 ms
    around its reference's, which that yardstick alone called TIMER_MISMATCH (``tests/test_scale_ray.py`` in CI)."""
    record = judged_alone(tmp_path, "1_relu", "return torch.relu(x)", "2048, 2048", "sleeper",
                          candidate_source(forward="time.sleep(0.5)\nreturn torch.relu(x)", header="import time"))
    assert record["verdict"]["reason"] == "OK", record["verdict"]
    assert record["timing"]["speedup"] < 0.05


def test_a_long_sample_forged_by_half_is_a_timer_mismatch_against_idle_samples_too(tmp_path: Path) -> None:
    """The same sleeper reporting half of each sample: the idle samples the reference worker runs as the second
    yardstick are as long as the time it *reported*, so what it hid stays outside them."""
    record = judged_alone(tmp_path, "1_relu", "return torch.relu(x)", "2048, 2048", "halver",
                          disarmed_forger("import time\ntime.sleep(0.5)\nreturn torch.relu(x)", 2))
    verdict = record["verdict"]
    assert verdict["reason"] == "TIMER_MISMATCH", verdict
    assert len(verdict["evidence"]["idle_overheads_ms"]) == unreported.IDLE_SAMPLES
    assert verdict["evidence"]["unreported_ms"] > 200  # half of each 0.5 s sample, seen beyond the idle samples'


# Disarms the tamper watch and sends its outputs' digests with a word where the exact hash goes: the controller reads
# what the candidate's worker sends as untrusted data.
MALFORMED_DIGEST = candidate_source(header="""
import gc

from pytest_cudal1.workers import digests, tamper

for obj in gc.get_objects():
    if isinstance(obj, tamper.TamperWatch):
        obj.objs = {}

_real = digests.fingerprint
digests.fingerprint = lambda out: [t[:-1] + ["not a hash"] for t in _real(out)]
""", forward="return torch.relu(x)")


def test_a_malformed_output_digest_is_a_protocol_violation(tmp_path: Path) -> None:
    record = judged_alone(tmp_path, "1_relu", "return torch.relu(x)", "64, 64", "malformed", MALFORMED_DIGEST)
    assert record["verdict"]["reason"] == "PROTOCOL_VIOLATION", record["verdict"]
    assert "malformed output digest" in record["verdict"]["message"]


# Disarms the tamper watch and names a word for its number of placements: the reference worker refills as many of the
# candidate's shared input sets as the candidate says it has, so the number is read as untrusted data too.
MALFORMED_PLACEMENTS = candidate_source(header="""
import gc

from pytest_cudal1.workers import tamper, timed_loop

for obj in gc.get_objects():
    if isinstance(obj, tamper.TamperWatch):
        obj.objs = {}

timed_loop.TimedLoop.place = lambda self, *args, **kwargs: "many"
""", forward="return torch.relu(x)")


def test_a_malformed_number_of_placements_is_a_protocol_violation(tmp_path: Path) -> None:
    record = judged_alone(tmp_path, "1_relu", "return torch.relu(x)", "64, 64", "placements", MALFORMED_PLACEMENTS)
    assert record["verdict"]["reason"] == "PROTOCOL_VIOLATION", record["verdict"]
    assert "named 'many' placements" in record["verdict"]["message"]
