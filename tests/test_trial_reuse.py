"""A task's trial recipes are drawn once per run and its reference outputs reused by every candidate of it.

The reference worker and its cache are trusted code, exercised here in-process on CPU tensors; the
plugin runs are real (``run_pytest``: real worker subprocesses) and read back from the ledger.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import pytest
import torch

from cudal1_helpers import (FAST, by_candidate, candidate_source, read_ledger, reason, run_pytest, task_source,
                            write_candidate, write_task)
from pytest_cudal1.recipes import Recipe
from pytest_cudal1.seeds import derived, task_seed
from pytest_cudal1.workers.reference import ReferenceWorker
from pytest_cudal1.workers.trial_cache import BYTES_VAR, TrialCache

TRIALS = 3  # under FAST's --cudal1-trials=2: the task's own inputs, a mixed recipe and one hypothesis draw
TASK = "1_relu"
DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU")])]

# Planted candidates, judged in this (alphabetical) order within one run.
RECORDER_HEADER = '''
import hashlib, os
TABLE = {table!r}


def _key(x):
    return hashlib.sha256(x.detach().cpu().contiguous().numpy().tobytes()).hexdigest()
'''
CANDIDATES = {
    # Honest, and it writes every input it meets and its answer where a later candidate can read them.
    "a_recorder": ("""
        y = torch.relu(x)
        table = torch.load(TABLE) if os.path.exists(TABLE) else {}
        table[_key(x)] = y.clone()
        torch.save(table, TABLE)
        return y
    """, RECORDER_HEADER),
    "b_honest": ("return torch.relu(x)", ""),
    "c_wrong": ("return torch.relu(x) + 1.0", ""),
    "d_wrong": ("return torch.relu(x) * 2.0", ""),
    "e_replay": ("""
        if self.__dict__.get("buf") is None:
            self.buf = torch.relu(x)
        return self.buf
    """, ""),
    # Answers every input a sibling recorded from the sibling's table and nothing else: trials repeat, timed
    # inputs never do.
    "f_lookup": ("""
        table = torch.load(TABLE) if os.path.exists(TABLE) else {}
        return table.get(_key(x), torch.zeros_like(x))
    """, RECORDER_HEADER),
}


def _layout(root: Path, names: list[str]) -> tuple[str, ...]:
    tasks, cands = root / "tasks", root / "cands"
    write_task(tasks, 1, TASK)
    table = str(root / "sibling-table.pt")
    for name in names:
        forward, header = CANDIDATES[name]
        write_candidate(cands, 1, TASK, name, candidate_source(forward, header.format(table=table)))
    return f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}"


def _judged(root: Path, names: list[str], *extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The ledger records of one real run over ``names``, by candidate name; the ledger text under ``"text"``."""
    root.mkdir(parents=True)
    result = run_pytest(root, *FAST, *_layout(root, names), f"--cudal1-cache-dir={root / 'cache'}",
                        "--cudal1-ledger=ledger.jsonl", *extra, env=env)
    records = {key.split("::")[1]: r for key, r in by_candidate(read_ledger(root / "ledger.jsonl")).items()}
    assert set(records) == set(names), result.stdout.str()[-3000:]
    return {"records": records, "text": (root / "ledger.jsonl").read_text(encoding="utf-8")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every candidate with the cache, then again with ``--cudal1-fresh-trials``; a second cached run of the
    wrong ones, and one with a given judge seed."""
    root = tmp_path_factory.mktemp("reuse")
    wrong = ["c_wrong", "d_wrong"]
    return {"cached": _judged(root / "cached", list(CANDIDATES)),
            "fresh": _judged(root / "fresh", list(CANDIDATES), "--cudal1-fresh-trials"),
            "again": _judged(root / "again", wrong),
            "seeded": _judged(root / "seeded", wrong, "--cudal1-judge-seed=5")}


def _failing_recipe(record: dict[str, Any]) -> str:
    return record["verdict"]["evidence"]["recipe"]


def test_later_candidates_are_served_from_the_cache_with_the_verdicts_of_fresh_trials(runs) -> None:
    cached, fresh = runs["cached"]["records"], runs["fresh"]["records"]
    assert cached["a_recorder"]["trials_cached"] == 0  # the task's first candidate computes every trial
    assert cached["b_honest"]["trials_cached"] == TRIALS
    assert {name: r["trials_cached"] for name, r in fresh.items()} == dict.fromkeys(CANDIDATES, 0)
    assert {name: reason(r) for name, r in cached.items()} == {name: reason(r) for name, r in fresh.items()}
    assert reason(cached["b_honest"]) == "OK"


def test_a_failure_after_an_honest_candidate_still_fails_on_cached_trials(runs) -> None:
    cached = runs["cached"]["records"]
    for name, expected in (("c_wrong", "WRONG_OUTPUT"), ("d_wrong", "WRONG_OUTPUT"), ("e_replay", "OUTPUT_REPLAY")):
        assert reason(cached[name]) == expected, (name, cached[name]["verdict"])
        assert cached[name]["trials_cached"] > 0, name


def test_answers_copied_from_a_sibling_pass_cached_trials_and_fail_on_timed_inputs(runs) -> None:
    """The inputs a sibling recorded recur in cached trials; the timed calls' do not, and are checked."""
    cached, fresh = runs["cached"]["records"], runs["fresh"]["records"]
    lookup = cached["f_lookup"]
    assert lookup["trials_cached"] == TRIALS
    assert reason(lookup) == "WRONG_OUTPUT" and "timed" in lookup["verdict"]["message"], lookup["verdict"]
    assert reason(fresh["f_lookup"]) == "WRONG_OUTPUT" and "recipe" in fresh["f_lookup"]["verdict"]["evidence"]


def test_recipes_are_drawn_per_task_per_run_and_follow_from_nothing_in_the_ledger(runs) -> None:
    cached, fresh, again = (runs[k]["records"] for k in ("cached", "fresh", "again"))
    # One task, one run: its candidates meet the same recipes; each item keeps a judge seed of its own.
    assert _failing_recipe(cached["c_wrong"]) == _failing_recipe(cached["d_wrong"])
    assert cached["c_wrong"]["judge_seed"] != cached["d_wrong"]["judge_seed"]
    assert _failing_recipe(fresh["c_wrong"]) != _failing_recipe(fresh["d_wrong"])
    # Another run draws other recipes.
    assert _failing_recipe(again["c_wrong"]) != _failing_recipe(cached["c_wrong"])
    # The recorded judge seed does not give the recipes (under --cudal1-fresh-trials it does, as before).
    for records, follows in ((cached, False), (again, False), (fresh, True)):
        for r in (records["c_wrong"], records["d_wrong"]):
            task_trial = str(Recipe(seed=derived(r["judge_seed"], "task-trial")))
            assert (_failing_recipe(r) == task_trial) is follows, r["verdict"]


def test_a_given_judge_seed_reproduces_the_task_recipes_without_writing_their_seed(runs) -> None:
    seeded = runs["seeded"]
    records = seeded["records"]
    secret = task_seed(5, records["c_wrong"]["task_sha256"])
    assert _failing_recipe(records["c_wrong"]) == str(Recipe(seed=derived(secret, "task-trial")))
    assert str(secret) not in seeded["text"]


def test_trials_larger_than_a_quarter_of_the_bound_are_recomputed(tmp_path: Path) -> None:
    # The relu task's trial: 4x8 float32 inputs and output, and a float64 output: 512 bytes.
    judged = _judged(tmp_path / "small", ["b_honest", "c_wrong"], env={BYTES_VAR: str(4 * 512 - 1)})["records"]
    assert [judged[n]["trials_cached"] for n in ("b_honest", "c_wrong")] == [0, 0]
    assert reason(judged["b_honest"]) == "OK" and reason(judged["c_wrong"]) == "WRONG_OUTPUT"


# ------------------------------------------------------- the reference worker and its cache, in-process ---

def _worker(device: str) -> ReferenceWorker:
    worker = ReferenceWorker()
    worker.device = device
    source = task_source("return torch.softmax(x, dim=-1) * 3.0", shape="16, 64")
    worker.load({"source": source, "origin": "task.py", "seed": 3})
    return worker


def _trial(worker: ReferenceWorker, recipe: Recipe, reuse: bool) -> tuple[dict[str, Any], list[Any], Any]:
    reply = worker.trial({"recipe": dataclasses.asdict(recipe), "reuse": reuse})
    return reply, [x.clone() for x in worker.inputs(None)], worker.expected.clone()


@pytest.mark.parametrize("device", DEVICES)
def test_a_cache_hit_gives_what_recomputing_gives_and_leaves_the_rounding_as_it_would(device: str) -> None:
    recipes = [Recipe(seed=11, family="normal", scale=100.0), Recipe(seed=12, family="wide"),
               Recipe(seed=11, family="normal", scale=100.0), Recipe(seed=13, family="task")]
    reusing, fresh = _worker(device), _worker(device)
    for k, recipe in enumerate(recipes):
        (got, inputs, expected), (want, want_inputs, want_expected) = (_trial(reusing, recipe, True),
                                                                       _trial(fresh, recipe, False))
        assert got.pop("cached") is (k == 2) and want.pop("cached") is False
        assert got == want
        assert all(torch.equal(a, b) for a, b in zip(inputs, want_inputs)) and torch.equal(expected, want_expected)
        assert inputs[0].device.type == expected.device.type == device
        assert (reusing.rounding, reusing.abs_rounding) == (fresh.rounding, fresh.abs_rounding)
    assert len(reusing.cache) == 3 and len(fresh.cache) == 0
    # Kept on the host: the GPU memory is the candidate's while it is timed.
    assert {t.device.type for t in reusing.cache.get(recipes[0]).originals} == {"cpu"}


def test_the_cache_evicts_the_least_recently_used_within_its_bound() -> None:
    cache: TrialCache[str] = TrialCache(limit=100)
    for key in "abcd":
        cache.put(key, key.upper(), 25)
    assert cache.get("a") == "A"  # now the most recently used
    cache.put("e", "E", 25)
    assert cache.get("b") is None and [cache.get(k) for k in "acde"] == list("ACDE") and cache.held == 100
    cache.put("f", "F", 26)  # over a quarter of the bound: not kept, nothing evicted
    assert cache.get("f") is None and len(cache) == 4
    assert not TrialCache(limit=0).fits(1)


def test_the_cache_bound_follows_the_hosts_memory_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """By default an eighth of the available host memory, at least 2 GiB (a fixed 2 GiB kept no trial above 512 MB:
    KernelBench's large tasks recomputed every trial for every candidate); the variable overrides it, 0 turns it off."""
    from pytest_cudal1.workers.memory import free_bytes
    from pytest_cudal1.workers.trial_cache import BYTES_VAR, DEFAULT_BYTES, HOST_SHARE, bound_from_env

    monkeypatch.delenv(BYTES_VAR, raising=False)
    available = free_bytes("cpu")
    assert available > 0
    bound = bound_from_env()
    assert bound >= DEFAULT_BYTES and abs(bound - max(DEFAULT_BYTES, available // HOST_SHARE)) < (256 << 20)
    monkeypatch.setenv(BYTES_VAR, str(1 << 20))
    assert bound_from_env() == 1 << 20
    monkeypatch.setenv(BYTES_VAR, "0")
    assert bound_from_env() == 0 and not TrialCache(bound_from_env()).fits(1)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_task_seeds_follow_from_a_given_judge_seed_and_task_and_are_drawn_otherwise() -> None:
    assert task_seed(5, _sha("a")) == task_seed(5, _sha("a")) != task_seed(5, _sha("b"))
    assert task_seed(5, _sha("a")) != task_seed(6, _sha("a"))
    assert task_seed(None, _sha("a")) != task_seed(None, _sha("a"))
