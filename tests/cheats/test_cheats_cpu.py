"""Planted cheats and honest controls, each judged by the real plugin; every verdict is asserted.

Every candidate lives in ``cases/candidates/level1/<task>/<name>.py`` with a
docstring that says what it does and what it should get. Candidates of one
task are judged in a few shared runs (``group``) to pay the worker start-up
once per run, not once per test. A false positive on a control is as serious
as a missed cheat, so controls are asserted exactly like cheats.

These cases run on the CPU (inputs on the CPU, Triton interpreted, Numba
simulated) and, unchanged, on a GPU machine (inputs on CUDA).
"""

from __future__ import annotations

import pytest

from .cheatkit import Case, explain, findings_text, groups_from, lookup, planted, verdict_of

OK = "OK"
RELU = "1_ReluScale"
LINEAR = "2_Linear"
ROWSUM = "3_RowSum"
MMSUM = "4_MatmulSum"
FLATTEN = "5_Flatten"

CASES: list[Case] = [
    # ---- controls (and two shape cheats) on y = 2 relu(x) ---------------------------------------
    planted(RELU, "honest", OK, group="relu-controls"),
    planted(RELU, "scratch_buffers", OK, group="relu-controls", why="scratch reused, output fresh"),
    planted(RELU, "size_manipulation", OK, group="relu-controls", why="module-level batch_size/get_inputs are inert"),
    planted(RELU, "slice_batch", "SHAPE_MISMATCH", group="relu-controls"),
    planted(RELU, "thread_joined", OK, group="relu-controls"),
    planted(RELU, "threadpool_with", OK, group="relu-controls"),
    planted(RELU, "threadpool_prestarted", OK, group="relu-controls", why="pool threads started in __init__"),
    planted(RELU, "threadpool_persistent", OK, group="relu-controls",
            why="probe: pool threads started lazily by the first forward stay idle afterwards; no pending work"),
    planted(RELU, "triton_kernel", OK, group="relu-controls"),
    planted(RELU, "numba_kernel", OK, group="relu-controls"),
    planted(RELU, "fake_messages_honest", OK, group="relu-controls"),
    # ---- cheats on the output, the inputs and the process ---------------------------------------
    planted(RELU, "lazy_subclass", "LAZY_OUTPUT", group="relu-outputs"),
    planted(RELU, "lazy_meta", "LAZY_OUTPUT", group="relu-outputs"),
    planted(RELU, "alias_inplace", "OUTPUT_ALIASES_INPUT", group="relu-outputs"),
    planted(RELU, "input_zeroed", "INPUT_MUTATED", group="relu-outputs"),
    planted(RELU, "uninit_empty_like", "UNINITIALIZED_OUTPUT", group="relu-outputs"),
    planted(RELU, "replay_same_buffer", "OUTPUT_REPLAY", group="relu-outputs"),
    planted(RELU, "replay_buffer_rewritten", "OUTPUT_REPLAY", group="relu-outputs", why="same storage every call"),
    planted(RELU, "replay_data_ptr", "OUTPUT_REPLAY", group="relu-outputs"),
    planted(RELU, "replay_shape", "OUTPUT_REPLAY", group="relu-outputs"),
    planted(RELU, "replay_fingerprint", "OUTPUT_REPLAY", group="relu-outputs"),
    planted(RELU, "deferred_thread", "DEFERRED_WORK", group="relu-outputs"),
    planted(RELU, "nondeterministic_alternating", "NONDETERMINISTIC", group="relu-outputs"),
    planted(RELU, "oob_after_input", "OUT_OF_BOUNDS_WRITE", group="relu-outputs"),
    planted(RELU, "oob_before_input", "OUT_OF_BOUNDS_WRITE", group="relu-outputs"),
    planted(RELU, "early_exit", "EARLY_EXIT", group="relu-outputs"),
    planted(RELU, "segfault", "CRASH", group="relu-outputs"),
    planted(RELU, "fake_messages_wrong", "WRONG_OUTPUT", group="relu-outputs"),
    # ---- process-wide state and monkeypatching (all compute correctly) ---------------------------
    planted(RELU, "gs_tf32_import", "PRECISION_SETTING_MODIFIED", group="relu-state"),
    planted(RELU, "gs_matmul_precision_forward", "PRECISION_SETTING_MODIFIED", group="relu-state"),
    planted(RELU, "gs_cudnn_tf32_import", "PRECISION_SETTING_MODIFIED", group="relu-state",
            why="PyTorch's default, but the judge runs float32 in float32"),
    planted(RELU, "gs_cudnn_benchmark_import", "GLOBAL_STATE_MODIFIED", group="relu-state"),
    planted(RELU, "gs_num_threads_forward", "GLOBAL_STATE_MODIFIED", group="relu-state"),
    planted(RELU, "gs_environ_import", "GLOBAL_STATE_MODIFIED", group="relu-state"),
    planted(RELU, "gs_jit_fuser_import", "GLOBAL_STATE_MODIFIED", group="relu-state"),
    # ---- the same with the algorithm-selection flag cudnn.benchmark accepted (--cudal1-allow-global) -----
    planted(RELU, "gs_cudnn_benchmark_import", OK, group="relu-allow-global"),
    planted(RELU, "gs_tf32_import", "PRECISION_SETTING_MODIFIED", group="relu-allow-global",
            why="a numeric flag is never accepted"),
    planted(RELU, "gs_num_threads_forward", "GLOBAL_STATE_MODIFIED", group="relu-allow-global"),
    planted(RELU, "tamper_allclose", "JUDGE_TAMPERING", group="relu-state"),
    planted(RELU, "tamper_perf_counter", "JUDGE_TAMPERING", group="relu-state"),
    planted(RELU, "tamper_cuda_synchronize", "JUDGE_TAMPERING", group="relu-state"),
    planted(RELU, "tamper_tensor_eq", "JUDGE_TAMPERING", group="relu-state"),
    planted(RELU, "tamper_runtime_timed_sample", "JUDGE_TAMPERING", group="relu-state"),
    planted(RELU, "tamper_bound_clock", "JUDGE_TAMPERING", group="relu-state",
            why="probe: the harness's own binding of the clock, not time's"),
    planted(RELU, "tamper_libc_handle", "JUDGE_TAMPERING", group="relu-state",
            why="probe: a C library handle of the harness, not a function"),
    planted(RELU, "tamper_harness_constant", "JUDGE_TAMPERING", group="relu-state",
            why="probe: a constant of the harness's timed region, not a function"),
    planted(RELU, "tamper_main_module_ref", "JUDGE_TAMPERING", group="relu-state",
            why="probe: a module the worker's request loop holds, swapped; its functions untouched"),
    planted(RELU, "tamper_builtin", "JUDGE_TAMPERING", group="relu-state", why="probe: a builtin the harness calls"),
    planted(RELU, "tamper_shadow_builtin", "JUDGE_TAMPERING", group="relu-state",
            why="probe: a new global of a harness module named as a builtin it calls"),
    planted(RELU, "tamper_wire_encode", "JUDGE_TAMPERING", group="relu-state"),
    planted(RELU, "tamper_wire_channel_method", "JUDGE_TAMPERING", group="relu-state",
         why="probe: a replaced method of a wire class, not a module function"),
    planted(RELU, "tamper_runtime_in_forward", "JUDGE_TAMPERING", group="relu-state",
         why="probe: patched during the first forward call, not at import"),
    # ---- numerics: precision, skipped work, weight layout, views ---------------------------------
    planted(LINEAR, "relaid_weights", OK, group="numerics"),
    planted(LINEAR, "linear_bf16", "PRECISION_LOSS", group="numerics"),
    planted(LINEAR, "linear_fp16", "PRECISION_LOSS", group="numerics"),
    planted(ROWSUM, "rowsum_honest", OK, group="numerics"),
    planted(ROWSUM, "rowsum_skip_1pct", "WRONG_OUTPUT", "PRECISION_LOSS", group="numerics"),
    planted(ROWSUM, "rowsum_bf16", "PRECISION_LOSS", group="numerics"),
    planted(FLATTEN, "flatten_view", OK, group="numerics", why="the reference aliases its input too"),
    planted(FLATTEN, "flatten_copy", OK, group="numerics"),
    # ---- an exact O(n^2) shortcut; the roofline floor with an absurdly low bandwidth ---------------
    planted(MMSUM, "matmulsum_honest", OK, group="matmulsum"),
    planted(MMSUM, "matmulsum_shortcut", OK, group="matmulsum"),
    planted(MMSUM, "matmulsum_honest", "BELOW_ROOFLINE", group="roofline"),
    planted(MMSUM, "matmulsum_shortcut", "BELOW_ROOFLINE", group="roofline"),
]

GROUPS = groups_from(CASES, extra={"roofline": ("--cudal1-peak-bandwidth=0.001",),
                                   "relu-allow-global": ("--cudal1-allow-global=cudnn.benchmark",)})


def _params(cases: list[Case]) -> list[object]:
    return [pytest.param(c, id=c.id, marks=pytest.mark.judge_group(GROUPS[c.group])) for c in cases]


@pytest.mark.parametrize("case", _params(CASES))
def test_verdict(case: Case, judged) -> None:
    result = judged.get(GROUPS[case.group])
    rec = lookup(result, case.name, case.task)
    reason, _ = verdict_of(rec)
    assert reason in case.expect, explain(rec, case.expect)


ALLOWED = next(c for c in CASES if c.group == "relu-allow-global" and c.name == "gs_cudnn_benchmark_import")


@pytest.mark.parametrize("case", _params([ALLOWED]))
def test_an_allowed_flag_is_named_in_the_record(case: Case, judged) -> None:
    rec = lookup(judged.get(GROUPS[case.group]), case.name, case.task)
    assert rec.get("global_flags_set") == ["torch.backends.cudnn.benchmark"], explain(rec, OK)


SHORTCUT = next(c for c in CASES if c.name == "matmulsum_shortcut" and c.group == "matmulsum")


@pytest.mark.parametrize("case", _params([SHORTCUT]))
def test_exact_shortcut_is_rewarded(case: Case, judged) -> None:
    """The O(n^2) shortcut passes *and* keeps its large speedup (no re-measure/roofline false positive)."""
    rec = lookup(judged.get(GROUPS[case.group]), case.name, case.task)
    assert verdict_of(rec)[0] == OK, explain(rec, OK)
    speedup = (rec.get("timing") or {}).get("speedup") or 0.0
    assert speedup > 2.0, f"shortcut speedup only {speedup:.3g}x; the control no longer exercises a big speedup"
    assert rec.get("reward", 0) > 0, f"an OK, faster candidate earned reward {rec.get('reward')}"


# ---- static findings: warnings in every record, never the verdict by themselves -------------------

STATIC = {c.name: c for c in CASES if c.group in ("relu-outputs", "relu-state", "relu-controls")}


@pytest.mark.parametrize(
    ("case", "words"),
    [
        pytest.param(STATIC["deferred_thread"], ("thread",), id="deferred_thread-mentions-threads",
                     marks=pytest.mark.judge_group(GROUPS["relu-outputs"])),
        pytest.param(STATIC["tamper_allclose"], ("monkeypatch", "monkey-patch", "monkey patch"),
                     id="tamper_allclose-mentions-monkeypatching", marks=pytest.mark.judge_group(GROUPS["relu-state"])),
        pytest.param(STATIC["tamper_runtime_timed_sample"], ("monkeypatch", "monkey-patch", "monkey patch", "harness"),
                     id="tamper_runtime-mentions-monkeypatching", marks=pytest.mark.judge_group(GROUPS["relu-state"])),
    ],
)
def test_static_findings_name_the_pattern(case: Case, words: tuple[str, ...], judged) -> None:
    rec = lookup(judged.get(GROUPS[case.group]), case.name, case.task)
    assert "static_findings" in rec, f"{case.name}: the record has no static_findings field (keys: {sorted(rec)})"
    text = findings_text(rec)
    assert any(w in text for w in words), f"{case.name}: static_findings mention none of {words}: {text[:600]}"


@pytest.mark.parametrize(
    "case",
    [pytest.param(STATIC[n], id=f"{n}-ok-despite-findings", marks=pytest.mark.judge_group(GROUPS["relu-controls"]))
     for n in ("thread_joined", "threadpool_prestarted", "fake_messages_honest")],
)
def test_static_findings_never_decide(case: Case, judged) -> None:
    """Controls that use threads or print look suspicious to a scanner; they must still be OK."""
    rec = lookup(judged.get(GROUPS[case.group]), case.name, case.task)
    assert "static_findings" in rec, f"{case.name}: the record has no static_findings field (keys: {sorted(rec)})"
    assert verdict_of(rec)[0] == OK, explain(rec, OK) + f"\n  static_findings: {findings_text(rec)[:400]}"
