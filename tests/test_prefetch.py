"""The next item's workers start while the current item finishes, and are the ones that item uses.

Real workers on bundled tasks: judging A with B announced as upcoming leaves B's candidate worker
running (started once A's reference was up), judging B takes exactly that worker, and a spare that does not
match the item judged next serves it (its folders set at load) unless it preloaded numba, which read the
other candidate's cache folder at import. When the next item's task
differs, its reference worker starts early too and is the one that task gets. A reference worker kept
for the task's next candidate drops its timing buffers after each item.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from cudal1_helpers import FAST, write_candidate, write_task
from kernelbench.loaders import load_tasks
from pytest_cudal1.builds import BuildPool
from pytest_cudal1.candidates import Candidate, reference_candidate
from pytest_cudal1.judge import Judge, JudgeConfig
from pytest_cudal1.reasons import Reason
from pytest_cudal1.spares import ANY, spare_key
from pytest_cudal1.timing import TimingConfig
from pytest_cudal1.unreported import UNREPORTED_MS
from pytest_cudal1.workers.process import WorkerFailure

ROOT = Path(__file__).resolve().parents[1]


def make_judge(tmp_path: Path, lookahead: int = 1) -> Judge:
    cfg = JudgeConfig(seed=3, workdir=tmp_path, trials=2, lookahead=lookahead,
                      timing=TimingConfig(budget_s=0.3, min_pairs=3, max_pairs=4, warmup=1))
    return Judge(cfg, BuildPool(tmp_path, 300, None), gpu=False)


def bundled(name: str):
    (task,), _ = load_tasks(ROOT / "kernelbench" / "tasks" / "level1" / f"{name}.py")
    return task


def test_upcoming_worker_is_started_early_and_taken(tmp_path: Path) -> None:
    task = bundled("1_ReLU")
    path = ROOT / "kernelbench" / "candidates" / "level1" / "1_ReLU" / "torch_fast.py"
    fast = Candidate("torch_fast", path.read_text(), str(path), 1, 1, path=str(path))
    ref = reference_candidate(task)
    judge = make_judge(tmp_path)
    try:
        first = judge.judge(task, ref, upcoming=[(task, fast)])
        assert first.verdict.reason is Reason.OK, first.verdict.message
        assert [key for key, _ in judge.spares.waiting] == [spare_key(task, fast)]
        spare = judge.spares.waiting[0][1]
        assert spare.proc.poll() is None  # started, alive, waiting for its item

        assert judge.spares.take(task, fast) == (spare, "spare")
        spare.close()

        judge.spares.prefetch([(task, fast)])
        unused = judge.spares.waiting[0][1]
        second = judge.judge(task, ref)  # not the announced candidate: that spare judges it, in its own folders
        assert second.verdict.reason is Reason.OK, second.verdict.message
        assert second.warm_start["candidate"] == "spare_other"
        assert unused in judge.closing.workers and not judge.spares.waiting  # asked to exit, reaped later
        judge.closing.reap()
        assert unused.proc.poll() is not None
        assert f"judges {task.id} reference" in unused.log_path.read_text()
    finally:
        judge.close()


def test_workers_start_as_many_items_ahead_as_the_lookahead(tmp_path: Path) -> None:
    """With a lookahead of 2, judging A starts B's and C's workers (on the CPU both have started before A is
    timed); B and C take their own, though their code is the same (rollouts of one prompt), and the reference
    pool keeps two blanks up."""
    relu, gelu = bundled("1_ReLU"), bundled("2_GELU_tanh")
    ref = reference_candidate(relu)
    b, c = dataclasses.replace(ref, name="rollout_b"), dataclasses.replace(ref, name="rollout_c")
    judge = make_judge(tmp_path, lookahead=2)
    try:
        first = judge.judge(relu, ref, upcoming=[(relu, b), (relu, c), (gelu, reference_candidate(gelu))])
        assert first.verdict.reason is Reason.OK, first.verdict.message
        assert [key for key, _ in judge.spares.waiting] == [spare_key(relu, b), spare_key(relu, c)]
        (_, for_b), (_, for_c) = judge.spares.waiting
        assert all(w.proc.poll() is None and not w.outstanding for w in (for_b, for_c))
        assert len(judge.references.blanks) == 2
        second = judge.judge(relu, b, upcoming=[(relu, c)])
        assert second.verdict.reason is Reason.OK and second.warm_start["candidate"] == "spare"
        assert for_b in judge.closing.workers and [w for _, w in judge.spares.waiting] == [for_c]
        third = judge.judge(relu, c)
        assert third.verdict.reason is Reason.OK and third.warm_start["candidate"] == "spare"
        assert for_c in judge.closing.workers and not judge.spares.waiting
    finally:
        judge.close()


def test_the_plugin_hands_each_item_the_next_ones_up_to_the_lookahead(pytester: pytest.Pytester) -> None:
    """Each item is told the items after it (``--cudal1-lookahead=2``: two), so their workers start during it."""
    pytester.makeconftest("""
import json


def pytest_runtest_call(item):
    if hasattr(item, "next_judged"):
        with open("told.jsonl", "a") as f:
            f.write(json.dumps([item.name, [i.name for i in item.next_judged]]) + "\\n")
""")
    tasks, cands = pytester.path / "tasks", pytester.path / "candidates"
    write_task(tasks, 1, "1_relu")
    for name in ("a", "b", "c"):
        write_candidate(cands, 1, "1_relu", name)
    result = pytester.runpytest_subprocess(*FAST, f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}",
                                           "--cudal1-lookahead=2", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    told = [json.loads(line) for line in (pytester.path / "told.jsonl").read_text().splitlines()]
    assert told == [["a", ["b", "c"]], ["b", ["c"]], ["c", []]]
    records = {r["candidate_name"]: r for r in map(json.loads, (pytester.path / "cudal1-ledger.jsonl").open())}
    assert records["b"]["warm_start"]["candidate"] == records["c"]["warm_start"]["candidate"] == "spare"


def test_a_spare_that_preloaded_numba_serves_only_its_own_candidate(tmp_path: Path) -> None:
    """numba reads NUMBA_CACHE_DIR when imported: a spare started for a numba candidate holds that candidate's
    cache folder, so another candidate gets a fresh worker, which runs in its own folders."""
    task = bundled("1_ReLU")
    path = ROOT / "kernelbench" / "candidates" / "level1" / "1_ReLU" / "numba_cuda.py"
    numba_candidate = Candidate("numba_cuda", path.read_text(), str(path), 1, 1, path=str(path))
    judge = make_judge(tmp_path)
    try:
        judge.spares.prefetch([(task, numba_candidate)])
        spare = judge.spares.waiting[0][1]
        assert "numba" in spare.preload
        checked = judge.judge(task, Candidate("folders_checked", FOLDERS_CHECKED, "<inline>", 1, 1))
        assert checked.verdict.reason is Reason.OK, checked.verdict.message
        assert checked.warm_start["candidate"] == "fresh" and spare.proc.poll() is not None
    finally:
        judge.close()


# A candidate that knows where its worker runs: its own build folder, with its own inductor cache folder in it.
FOLDERS_CHECKED = """import os

import torch


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        if os.environ.get("TORCHINDUCTOR_CACHE_DIR") != os.path.join(os.getcwd(), "inductor"):
            raise RuntimeError(f"cwd {os.getcwd()}, inductor cache {os.environ.get('TORCHINDUCTOR_CACHE_DIR')}")

    def forward(self, x):
        return torch.relu(x)
"""


def test_a_worker_started_before_its_candidate_was_known_is_taken_with_the_candidates_folders(tmp_path: Path) -> None:
    """The optimizer's next round is not written while its last judgment runs: with ``more`` a worker starts for
    whichever candidate comes, and that one gets it, running in its own folders (set at ``load``)."""
    relu = bundled("1_ReLU")
    judge = make_judge(tmp_path)
    try:
        first = judge.judge(relu, reference_candidate(relu), more=True)
        assert first.verdict.reason is Reason.OK, first.verdict.message
        assert [key for key, _ in judge.spares.waiting] == [ANY]
        spare = judge.spares.waiting[0][1]
        later = Candidate("written_later", FOLDERS_CHECKED, "<round 2>", 1, 1)
        second = judge.judge(relu, later)
        assert second.verdict.reason is Reason.OK, second.verdict.message
        assert second.warm_start["candidate"] == "spare_any" and spare in judge.closing.workers  # used, ending
        third = judge.judge(relu, reference_candidate(relu))  # nothing more announced: no spare waiting
        assert third.warm_start["candidate"] == "fresh" and not judge.spares.waiting
    finally:
        judge.close()


def test_next_tasks_reference_worker_is_started_early_and_taken(tmp_path: Path) -> None:
    relu, gelu = bundled("1_ReLU"), bundled("2_GELU_tanh")
    judge = make_judge(tmp_path)
    try:
        first = judge.judge(relu, reference_candidate(relu), upcoming=[(gelu, reference_candidate(gelu))])
        assert first.verdict.reason is Reason.OK, first.verdict.message
        assert judge.references.spare is not None and judge.references.spare[0] == gelu.sha256
        spare = judge.references.spare[1]
        assert spare.proc.poll() is None
        second = judge.judge(gelu, reference_candidate(gelu))
        assert second.verdict.reason is Reason.OK, second.verdict.message
        assert judge.references.worker is spare and judge.references.spare is None
    finally:
        judge.close()


def test_an_items_workers_end_while_the_next_item_starts(tmp_path: Path) -> None:
    """The candidate worker, and the reference worker when the next task is another, are asked to exit when the item
    ends and reaped in the next one: before its reference's probe reads the free memory, and before its calls."""
    relu, gelu = bundled("1_ReLU"), bundled("2_GELU_tanh")
    judge = make_judge(tmp_path)
    try:
        first = judge.judge(relu, reference_candidate(relu), upcoming=[(gelu, reference_candidate(gelu))])
        assert first.verdict.reason is Reason.OK, first.verdict.message
        ending = list(judge.closing.workers)
        assert [w.role for w in ending] == ["candidate", "reference"] and judge.references.worker is None
        assert all(w.exit_asked is not None for w in ending)
        assert first.timing.unreported_allowed_ms >= UNREPORTED_MS  # the clock's allowance, recorded
        second = judge.judge(gelu, reference_candidate(gelu))
        assert second.verdict.reason is Reason.OK, second.verdict.message
        assert all(w.proc.poll() is not None for w in ending)
        assert "teardown_wait" in second.warm_start["reference_s"] and "teardown_wait" in second.phase_s
        assert judge.references.worker is not None  # no next task announced: kept for GELU
        last = list(judge.closing.workers)
        assert [w.role for w in last] == ["candidate"]
    finally:
        judge.close()
    assert all(w.proc.poll() is not None for w in last) and not judge.closing.workers  # the judge's close reaps it


def test_a_new_tasks_reference_is_the_blank_worker_started_ahead(tmp_path: Path) -> None:
    """A reference worker started ahead for whichever task comes (its imports done while items are judged)
    serves the next new task, named for it; the next blank starts then, and closing the judge ends it."""
    relu, gelu, softmax = bundled("1_ReLU"), bundled("2_GELU_tanh"), bundled("3_Softmax_rows")
    judge = make_judge(tmp_path)
    try:
        first = judge.judge(relu, reference_candidate(relu))  # no upcoming pair: nothing loads ahead
        assert first.verdict.reason is Reason.OK, first.verdict.message
        (blank,) = judge.references.blanks
        assert blank.proc.poll() is None and blank.log_path.name == "reference-next-1.log"
        blank.request("ready", None, 120)  # up to its imports, no task
        second = judge.judge(gelu, reference_candidate(gelu), upcoming=[(softmax, reference_candidate(softmax))])
        assert second.verdict.reason is Reason.OK and second.warm_start["reference"] == "fresh"
        # it served GELU and ends with the item: the next task is another
        assert blank in judge.closing.workers and blank.log_path.name == "reference-L1_2_GELU_tanh.log"
        assert "--- started ahead; loads L1/2_GELU_tanh ---" in blank.log_path.read_text()
        # the spare for the upcoming task took the next blank, and a third one is up
        spare = judge.references.spare[1]
        assert spare.log_path.name == "reference-L1_3_Softmax_rows.log" and len(judge.references.blanks) == 1
        (last,) = judge.references.blanks
    finally:
        judge.close()
    assert last.proc.poll() is not None


def test_kept_reference_worker_frees_its_timing_buffers_after_each_item(tmp_path: Path) -> None:
    task = bundled("1_ReLU")
    judge = make_judge(tmp_path)
    try:
        first = judge.judge(task, reference_candidate(task))
        assert first.verdict.reason is Reason.OK, first.verdict.message
        kept = judge.references.worker
        with pytest.raises(WorkerFailure, match="AssertionError"):  # no timed loop left to sample
            kept.request("time", {"seed": 1, "calls": 1}, 30)
        second = judge.judge(task, reference_candidate(task))  # the same worker times again
        assert second.verdict.reason is Reason.OK, second.verdict.message
        assert judge.references.worker is kept
    finally:
        judge.close()


def test_the_next_items_device_part_is_asked_for_once_timing_ends_not_after_the_item(tmp_path: Path) -> None:
    """The next item's workers start their device part while this item's kernels are listed and its workers
    close (nothing is timed then), not after: on the H200 reference start was 100 s of 590 over 37 records."""
    relu, gelu = bundled("1_ReLU"), bundled("2_GELU_tanh")
    events: list[str] = []
    judge = make_judge(tmp_path)
    judge.on_phase = lambda name, record, ended: events.append(name) if ended else None
    asked = judge.spares.to_device
    judge.spares.to_device = lambda: (events.append("to_device"), asked())[1]
    try:
        first = judge.judge(relu, reference_candidate(relu), upcoming=[(gelu, reference_candidate(gelu))])
        assert first.verdict.reason is Reason.OK, first.verdict.message
        assert events.index("to_device") == events.index("timing") + 1 < events.index("profile")
        assert judge.references.spare_placed
        second = judge.judge(gelu, reference_candidate(gelu))
        assert second.verdict.reason is Reason.OK and second.warm_start["reference"] == "loaded_ahead"
    finally:
        judge.close()
