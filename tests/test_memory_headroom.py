"""Memory headroom (issue 14, item 11): the harness leaves the candidate room, says what it held when a
candidate runs out of memory, and a reference that cannot run on this machine is a harness error.

A task too large for the machine is found two ways, both real: its inputs' sizes drawn on the meta device
(nothing allocated) against the available memory, and an out-of-memory error in its first trial, run alone
before any candidate. Either way the item is skipped with REFERENCE_TOO_LARGE and gets no ledger line
(no reward), since the candidate never ran.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cudal1_helpers import FAST, by_candidate, candidate_source, read_ledger, run_pytest, task_source, \
    write_candidate, write_task

from pytest_cudal1.compare import compare
from pytest_cudal1.messages import asked_bytes, memory_message
from pytest_cudal1.reasons import Reason
from pytest_cudal1.workers import memory
from pytest_cudal1.workers.memory import free_bytes, placements_fitting
from pytest_cudal1.workers.reference import NEED_PER_INPUT_BYTE, NEED_PER_OUTPUT_BYTE, _on_device

TOO_BIG = 1 << 42  # float32 elements: 17.6 TB, more than any machine here has
# A reference that runs out of memory after its first 60 calls: the trials pass, then it fails in timing, as the
# H200's did beside a 6.4 GB task's graph wrapper. The run's samples are 10 ms (``--cudal1-sample-ms``), so its short
# relu's timing makes hundreds of calls whatever this machine's speed (at the default 1 ms, 44-74 calls in all).
REFERENCE_OOM_WHEN_TIMED = """
Model.calls = getattr(Model, "calls", 0) + 1
if Model.calls > 60:
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB.")
return torch.relu(x)"""
# A candidate that holds 1.6 GB it never needs: far more than the reference's worker holds plus its headroom.
HOARDER = candidate_source(header="HOARD = torch.ones(400_000_000)")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[pytest.RunResult, dict[str, dict]]:
    root = tmp_path_factory.mktemp("headroom")
    tasks, cands = root / "tasks", root / "cands"
    write_task(tasks, 1, "1_relu")
    write_task(tasks, 1, "2_huge_inputs", task_source(shape=str(1 << 40)))  # 4.4 TB of input
    write_task(tasks, 1, "3_huge_temporary", task_source(forward=f"return x + torch.empty({TOO_BIG}).sum() * 0"))
    write_candidate(cands, 1, "1_relu", "fast")
    write_candidate(cands, 1, "1_relu", "greedy", candidate_source(forward=f"return x + torch.empty({TOO_BIG}).sum() * 0"))
    write_candidate(cands, 1, "2_huge_inputs", "fast")
    write_candidate(cands, 1, "3_huge_temporary", "fast")
    # The reference itself fails once timing is under way; each task has a source of its own, so each count is its
    # own (two tasks of one source shared the count).
    for pid, candidate in ((4, "fast"), (5, "hoarder")):
        write_task(tasks, 1, f"{pid}_reference_oom_when_timed", task_source(forward=REFERENCE_OOM_WHEN_TIMED + f"  # {pid}"))
        write_candidate(cands, 1, f"{pid}_reference_oom_when_timed", candidate,
                        HOARDER if candidate == "hoarder" else None)
    ledger = root / "ledger.jsonl"
    result = run_pytest(root, *FAST, "--cudal1-sample-ms=10", f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}",
                        "-rfEs", f"--cudal1-cache-dir={root / 'cache'}", f"--cudal1-ledger={ledger}")
    return result, by_candidate(read_ledger(ledger))


def test_a_task_whose_inputs_exceed_the_machine_is_skipped_with_its_need(run) -> None:
    result, records = run
    assert "L1/2_huge_inputs::fast" not in records  # no ledger line: no reward, nothing against the candidate
    need_gb = (5 + 3) * (1 << 40) * 4 / 1e9  # inputs five times, outputs (as large) three times
    line = next(x for x in result.stdout.lines if "L1/2_huge_inputs::fast" in x and "SKIPPED" in x)
    assert "[REFERENCE_TOO_LARGE]" in line and f"needs about {need_gb:.2f} GB of host memory" in line
    assert f"{(1 << 40) * 4 / 1e9:.2f} GB of inputs" in line and "not the candidate's" in line


def test_a_reference_that_runs_out_of_memory_alone_is_skipped_too(run) -> None:
    result, records = run
    assert "L1/3_huge_temporary::fast" not in records
    line = next(x for x in result.stdout.lines if "L1/3_huge_temporary::fast" in x and "SKIPPED" in x)
    assert "[REFERENCE_TOO_LARGE]" in line and "run alone before any candidate, ran out of memory" in line


def test_a_candidate_out_of_memory_says_what_the_harness_held_and_what_it_asked_for(run) -> None:
    result, records = run
    record = records["L1/1_relu::greedy"]
    assert record["verdict"]["reason"] == "OUT_OF_MEMORY" and record["reward"] == 0.0
    message = record["verdict"]["message"]
    assert f"the candidate asked for {TOO_BIG * 4 / 1e9:.2f} GB" in message
    assert "the harness's reference worker held" in message and "timing buffers" in message
    held = record["verdict"]["evidence"]["harness_held"]
    assert held["reference"]["held_bytes"] > 0  # the reference worker's resident memory, read from it
    assert "L1/1_relu::fast" in records  # the same task's other candidate is judged as usual
    failed = [x for x in result.stdout.lines if x.startswith("FAILED")]
    assert any("L1/1_relu::greedy" in x for x in failed) and not any("huge" in x for x in failed)


def test_a_reference_out_of_memory_beside_a_modest_candidate_is_the_harness_error(run) -> None:
    result, records = run
    assert "L1/4_reference_oom_when_timed::fast" not in records  # skipped: no reward, nothing against it
    line = next(x for x in result.stdout.lines if "L1/4_reference_oom_when_timed::fast" in x and "SKIPPED" in x)
    assert "[REFERENCE_TOO_LARGE]" in line and "the reference ran out of memory beside a candidate within" in line
    assert "the reference asked for 2.15 GB" in line


def test_a_reference_out_of_memory_beside_a_hoarding_candidate_is_the_candidates(run) -> None:
    _, records = run
    verdict = records["L1/5_reference_oom_when_timed::hoarder"]["verdict"]
    assert verdict["reason"] == "OUT_OF_MEMORY", verdict["message"]
    assert "while timing" in verdict["message"] and "the reference asked for 2.15 GB" in verdict["message"]
    held = verdict["evidence"]["harness_held"]
    assert held["candidate"]["held_bytes"] - held["reference"]["held_bytes"] > 1_000_000_000  # the hoard


def test_torchs_out_of_memory_messages_name_the_request() -> None:
    cuda = ("CUDA out of memory. Tried to allocate 12.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which "
            "1.78 GiB is free. Process 4242 has 89.22 GiB memory in use.")
    assert asked_bytes(cuda) == 12 * 2**30
    assert asked_bytes("DefaultCPUAllocator: can't allocate memory: you tried to allocate 17592186044416 bytes.") \
        == 17592186044416
    assert asked_bytes("some other failure") is None
    text = memory_message({"reference": {"held_bytes": 89_220_000_000, "timing_bytes": 51_200_000_000},
                           "candidate": None}, 12 * 2**30, 25_600_000_000)
    assert "asked for 12.88 GB" in text and "held 89.22 GB (51.20 GB of it timing buffers)" in text
    assert "headroom left for the candidate while timing: 25.60 GB" in text


def test_placements_leave_the_candidates_headroom_and_shrink_to_one() -> None:
    free = free_bytes("cpu")
    assert free > 0
    per = max(1, free // 100)  # a quarter of the free memory holds 25 of these
    assert placements_fitting(per, "cpu", 8) == 8
    # Leaving the candidate all but 3 placements' worth: the harness shrinks its own buffers first ...
    assert placements_fitting(per, "cpu", 8, reserve=free - 3 * per) <= 3
    # ... placed for two workers (the reference places first, for the candidate too), half as many ...
    assert placements_fitting(per, "cpu", 8, reserve=free - 4 * per, copies=2) <= 2
    # ... less what each worker holds beside its placements (the outputs of its last calls) ...
    assert placements_fitting(per, "cpu", 8, reserve=free - 8 * per, copies=2) >= 3
    assert placements_fitting(per, "cpu", 8, reserve=free - 8 * per, copies=2, beside=2 * per) <= 2
    # ... and never fewer than one: timing needs a placement.
    assert placements_fitting(per, "cpu", 8, reserve=2 * free) == 1


HUGE_ELEMENTS = 1_600_000_000  # 6.4 GB of float32, L1/19's size
# How long the GPU test waits for the memory the reference probe asks for: processes of earlier tests
# (in-process GPU tests' cached blocks are released at once; workers of a killed run exit on their own).
FREE_WAIT_S = 120.0


def _memory_holders() -> str:
    """Who holds memory on the judged GPU, one "pid N: GB, command" per process (NVML), for a failure message."""
    from pytest_cudal1.environment import _nvml, gpu_index

    nvml = _nvml()
    if nvml is None:
        return "no NVML here to list the processes holding GPU memory"
    try:
        procs = nvml.nvmlDeviceGetComputeRunningProcesses(nvml.nvmlDeviceGetHandleByIndex(gpu_index()))
    except Exception as exc:  # noqa: BLE001 - a message, not a check
        return f"NVML could not list the processes: {exc}"
    lines = []
    for proc in procs:
        try:
            command = Path(f"/proc/{proc.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            command = "?"
        lines.append(f"pid {proc.pid}: {(proc.usedGpuMemory or 0) / 1e9:.2f} GB, {command[:200]}")
    return "processes holding GPU memory:\n" + ("\n".join(lines) or "none")


def _wait_for_free_device_memory(need: int) -> None:
    """Give the reference probe the memory it asks for: this process's cached blocks are released and
    leftovers of earlier tests get ``FREE_WAIT_S`` to exit. A GPU too small is a skip; memory still held
    after the wait fails the test, naming who holds it."""
    import torch

    torch.cuda.empty_cache()  # blocks cached by this session's in-process GPU tests
    free, total = torch.cuda.mem_get_info()
    if total < need:
        pytest.skip(f"the task needs about {need / 1e9:.2f} GB of device memory; this GPU has {total / 1e9:.2f} GB")
    deadline = time.monotonic() + FREE_WAIT_S
    while free < need and time.monotonic() < deadline:
        time.sleep(2.0)
        free, _ = torch.cuda.mem_get_info()
    if free < need:
        pytest.fail(f"only {free / 1e9:.2f} GB of the GPU's {total / 1e9:.2f} GB is free after {FREE_WAIT_S:.0f} s; "
                    f"the reference probe asks for {need / 1e9:.2f} GB\n{_memory_holders()}")


@pytest.mark.gpu
def test_an_output_the_device_has_no_room_for_is_compared_from_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference worker checks a sent output on its device; with no room there it compares from the host,
    block by block, and finds the same verdicts (a wrong element in the last of several blocks)."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    expected = torch.randn(3, (1 << 22) + 5, device="cuda")
    sent = expected.cpu()
    wrong = sent.clone()
    wrong[2, -1] += 1.0
    for t in (sent, wrong):
        t.wire_device = "cuda:0"
    assert _on_device(sent, "cuda").device.type == "cuda"  # room: moved over whole, as before
    monkeypatch.setattr(memory, "room_bytes", lambda device: 0)
    kept = _on_device(sent, "cuda")
    assert kept.device.type == "cpu"
    assert compare(kept, expected) is None
    bad = compare(_on_device(wrong, "cuda"), expected)
    assert bad is not None and bad.reason is Reason.WRONG_OUTPUT and bad.evidence["index"] == (2, (1 << 22) + 4)


@pytest.mark.gpu
def test_short_of_memory_the_reference_lets_go_of_outputs_the_candidate_must_keep() -> None:
    """Session 28's 6.4 GB task: the reference ran out of memory holding two outputs of its own that nothing
    checks. Short of room, a candidate's held outputs go down to ``HELD_CALLS_SHORT`` (a buffer alternated
    between two calls is still caught), and the reference's below that (it leaves room for both sides' calls)."""
    import torch

    from pytest_cudal1.workers.timed_loop import HELD_CALLS_SHORT, TimedLoop
    from pytest_cudal1.workers.timing_inputs import TimingInputs

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    n = 1 << 28  # a GiB of float32 per output: a call's room (its output and poison twice over) is 2 GiB
    held = {}
    for checked in (True, False):
        loop = TimedLoop(lambda args: torch.relu(args[0]), TimingInputs([torch.rand(n, device="cuda")], "cuda"),
                         [4 * n], checked=checked)
        loop.place(1, 1)
        for seed in range(HELD_CALLS_SHORT):
            loop.inspect(loop.prepare(seed, 1, False)[0](), False, aliasing_allowed=True)
        assert len(loop.held) == HELD_CALLS_SHORT
        # 1.5 GiB free: short of a call's room, with room for the poisoned GiB the candidate's next call takes
        filler = torch.empty(memory.free_bytes("cuda") - (3 << 29), dtype=torch.uint8, device="cuda")
        assert memory.room_bytes("cuda") < 8 * n
        loop.prepare(HELD_CALLS_SHORT, 1, False)
        held[checked] = len(loop.held)
        del filler, loop
        torch.cuda.empty_cache()
    assert held[True] == HELD_CALLS_SHORT, held
    assert held[False] < HELD_CALLS_SHORT, held


@pytest.mark.gpu
def test_a_cuda_graph_wrapper_of_a_6_gb_task_has_room(tmp_path: Path) -> None:
    """L1/19's OUT_OF_MEMORY: an honest CUDA-graph wrapper keeps one static copy of its inputs. With twice
    the reference's peak left free for it, it is judged OK."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    huge_bytes = HUGE_ELEMENTS * 4  # the input, and relu's output as large
    _wait_for_free_device_memory(NEED_PER_INPUT_BYTE * huge_bytes + NEED_PER_OUTPUT_BYTE * huge_bytes)
    write_task(tmp_path / "tasks", 1, "19_relu_big", task_source(shape=f"4, {HUGE_ELEMENTS // 4}"))
    wrapper = candidate_source(header="""
class Graphed:
    graph = None
""", forward="""
g = Graphed
if g.graph is None:
    g.x = x.clone()
    g.graph = torch.cuda.CUDAGraph()
    torch.relu(g.x)
    torch.cuda.synchronize()
    with torch.cuda.graph(g.graph):
        g.y = torch.relu(g.x)
g.x.copy_(x)
g.graph.replay()
return g.y.clone()
""")
    write_candidate(tmp_path / "cands", 1, "19_relu_big", "graph_wrapper", wrapper)
    ledger = tmp_path / "ledger.jsonl"
    result = run_pytest(tmp_path, "-rs", "--cudal1-trials=2", "--cudal1-seed=1", f"--cudal1-tasks={tmp_path / 'tasks'}",
                        f"--cudal1-candidates={tmp_path / 'cands'}", f"--cudal1-ledger={ledger}",
                        f"--cudal1-cache-dir={tmp_path / 'cache'}", "--cudal1-time-budget=3",
                        timeout=560)  # 6.4 GB crosses the pipes ~27 times (inputs and outputs of each call)
    records = read_ledger(ledger)
    if not records:  # a skipped item leaves no ledger line: its SKIPPED row says why, and who held the GPU
        rows = [line for line in result.outlines if "19_relu_big" in line and "graph_wrapper" in line]  # -rs: why
        pytest.fail("no ledger line; the run's lines naming the item:\n" + "\n".join(rows) + "\n"
                    + _memory_holders() + "\n--- the run's output, last lines ---\n" + "\n".join(result.outlines[-60:]))
    verdict = records[0]["verdict"]
    assert verdict["reason"] == "OK", f"{verdict['message']}\n{verdict.get('evidence')}\n{result.stdout.str()}"


# Writes the index of each output it returned once that output is freed (a finalizer, nothing held).
FREED_PROBE = candidate_source(header="""
import weakref

CALLS = [0]


def _freed(i):
    with open({out!r}, "a") as f:
        f.write(f"{{i}}\\n")
""", forward="""
out = torch.relu(x)
weakref.finalize(out, _freed, CALLS[0])
CALLS[0] += 1
return out
""")


def test_the_trials_outputs_are_let_go_before_timing(tmp_path: Path) -> None:
    """The candidate's worker holds its last trials' outputs (a replayed buffer among trials is caught so) and
    lets them go when timing is prepared: on the H200 a 6.4 GB task's four filled the room its reference
    needed while timed."""
    import torch

    from pytest_cudal1.workers.process import WorkerProcess

    freed = tmp_path / "freed"
    worker = WorkerProcess("candidate", tmp_path / "candidate.log")
    try:
        path = tmp_path / "probe_candidate.py"
        path.write_text(FREED_PROBE.format(out=str(freed)))
        worker.request("load", {"path": str(path), "module_name": "probe_candidate"}, 120)
        worker.request("build", {"init_inputs": [], "seed": 1}, 120)
        for _ in range(3):
            worker.request("run", {"inputs": [torch.randn(4, 8)]}, 60)
        held_in_trials = freed.read_text().split() if freed.exists() else []
        worker.request("prepare_timing", {"inputs": [torch.randn(4, 8)]}, 60)
        after = freed.read_text().split()
    finally:
        worker.close()
    assert held_in_trials == [], "a trial's output was let go while trials still ran"
    assert sorted(after) == ["0", "1", "2"], after
