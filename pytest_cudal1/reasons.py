"""The one enumeration of verdict reason codes.

The judge, the ledger, the terminal summary, the report and docs/anticheat.md all
use these names. A check that rejects a candidate adds its code here, with a
one-line meaning, and puts its evidence in the verdict.
"""

from __future__ import annotations

import enum


class Reason(str, enum.Enum):
    """A stable reason code; the value is the code written to the ledger."""

    def __new__(cls, code: str, meaning: str) -> "Reason":
        obj = str.__new__(cls, code)
        obj._value_ = code
        obj.meaning = meaning  # type: ignore[attr-defined]
        return obj

    OK = ("OK", "correct on every trial and accepted")

    # Loading: the task or candidate file itself is unusable.
    BAD_TASK = ("BAD_TASK", "the task source is unusable (syntax, missing Model/get_inputs/get_init_inputs)")
    BAD_CANDIDATE_FILE = ("BAD_CANDIDATE_FILE", "the candidate record or file cannot be read")
    NO_CODE = ("NO_CODE", "the model's answer contains no module defining class ModelNew (nothing was run)")
    REFERENCE_ERROR = ("REFERENCE_ERROR", "the reference model failed on the harness's inputs")

    # Building and importing the candidate.
    SYNTAX_ERROR = ("SYNTAX_ERROR", "the candidate module does not parse")
    IMPORT_ERROR = ("IMPORT_ERROR", "the candidate module raised while being imported")
    COMPILE_ERROR = ("COMPILE_ERROR", "an extension or kernel in the candidate failed to compile")
    COMPILE_TIMEOUT = ("COMPILE_TIMEOUT", "importing, constructing or first calling (lazy compilation) the candidate ran past the compile timeout")
    NO_MODELNEW = ("NO_MODELNEW", "the candidate module defines no ModelNew class")
    INIT_ERROR = ("INIT_ERROR", "ModelNew(*get_init_inputs()) raised")

    # Running the candidate.
    RUNTIME_ERROR = ("RUNTIME_ERROR", "ModelNew.forward raised a Python exception")
    CUDA_ERROR = ("CUDA_ERROR", "a CUDA error (illegal address, launch failure, ...) in the candidate")
    OUT_OF_MEMORY = ("OUT_OF_MEMORY", "the candidate ran out of device or host memory")
    TIMEOUT = ("TIMEOUT", "a call into the candidate ran past the call timeout; its process group was killed")
    CRASH = ("CRASH", "the candidate's worker process died (signal or non-zero exit)")
    EARLY_EXIT = ("EARLY_EXIT", "the candidate's worker exited with status 0 in the middle of a request")
    PROTOCOL_VIOLATION = ("PROTOCOL_VIOLATION", "the candidate's worker sent a malformed or unexpected message")

    # Comparing outputs with the reference.
    STRUCTURE_MISMATCH = ("STRUCTURE_MISMATCH", "the output is not the same nesting of tensors/values as the reference's")
    SHAPE_MISMATCH = ("SHAPE_MISMATCH", "an output tensor has the wrong shape")
    DTYPE_MISMATCH = ("DTYPE_MISMATCH", "an output tensor has the wrong dtype")
    DEVICE_MISMATCH = ("DEVICE_MISMATCH", "an output tensor lives on another device type than the reference's")
    NONFINITE_MISMATCH = ("NONFINITE_MISMATCH", "NaN/Inf appear at other positions than in the reference")
    WRONG_OUTPUT = ("WRONG_OUTPUT", "values differ from the float64 reference beyond the documented tolerance")
    NONDETERMINISTIC = ("NONDETERMINISTIC", "the same inputs gave different failures on a re-run (likely a race)")

    # Cheats: work or results that fake a speedup (docs/anticheat.md has how each is caught).
    STREAM_ESCAPE = ("STREAM_ESCAPE", "the output was not ready on the caller's stream when forward returned (side stream)")
    DEFERRED_WORK = ("DEFERRED_WORK", "a thread or child process was still running, or still writing the output, after forward returned")
    LAZY_OUTPUT = ("LAZY_OUTPUT", "the output is a tensor subclass, overrides __torch_function__ or has no real storage")
    OUTPUT_ALIASES_INPUT = ("OUTPUT_ALIASES_INPUT", "the output shares memory with an input (the reference's does not)")
    OUTPUT_REPLAY = ("OUTPUT_REPLAY", "an output was replayed: the same buffer or the same values returned for different inputs")
    UNINITIALIZED_OUTPUT = ("UNINITIALIZED_OUTPUT", "the output holds the harness's poison pattern: memory never written")
    INPUT_MUTATED = ("INPUT_MUTATED", "forward changed its inputs")
    PRECISION_LOSS = ("PRECISION_LOSS", "errors at the level of bf16/fp16/TF32 arithmetic in a float32 task")
    GLOBAL_STATE_MODIFIED = ("GLOBAL_STATE_MODIFIED", "a process-wide setting (TF32, cudnn, threads, env, persisting L2) changed")
    PRECISION_SETTING_MODIFIED = ("PRECISION_SETTING_MODIFIED", "a process-wide setting that changes numerics (TF32, reduced-precision reductions, float32 matmul precision, default dtype) changed")
    JUDGE_TAMPERING = ("JUDGE_TAMPERING", "harness, timer or torch functions were replaced (monkeypatching)")
    OUT_OF_BOUNDS_WRITE = ("OUT_OF_BOUNDS_WRITE", "guard bytes around a harness-owned buffer changed, or the sanitizer reported a bad access")
    LIBRARY_ONLY = ("LIBRARY_ONLY", "only library kernels ran (custom-kernel-only track)")
    BELOW_ROOFLINE = ("BELOW_ROOFLINE", "faster than moving the task's bytes at the device's measured peak bandwidth allows")
    SPEEDUP_NOT_REPRODUCED = ("SPEEDUP_NOT_REPRODUCED", "a large speedup did not hold when re-measured")
    TIMER_MISMATCH = ("TIMER_MISMATCH", "the worker's reported time disagrees with the controller's wall clock")

    # Not judged here.
    BACKEND_UNAVAILABLE = ("BACKEND_UNAVAILABLE", "the candidate's backend cannot run on this machine (skipped)")
    REFERENCE_TOO_LARGE = ("REFERENCE_TOO_LARGE", "the task's reference needs more memory than this machine has: "
                           "a harness error, not the candidate's (skipped, no reward)")
    STATEFUL_REFERENCE = ("STATEFUL_REFERENCE", "the task's reference answers the same inputs differently on consecutive "
                          "calls (it keeps state between calls), so no call can be compared: not the candidate's "
                          "(skipped, no reward)")

    @property
    def passed(self) -> bool:
        return self is Reason.OK

    @property
    def judged(self) -> bool:
        """False for the codes of pairs this machine could not judge: skipped, no reward, never the candidate's."""
        return self.value not in NOT_JUDGED


NOT_JUDGED = ("BACKEND_UNAVAILABLE", "REFERENCE_TOO_LARGE", "STATEFUL_REFERENCE")  # skipped: no ledger line, no reward


def describe(code: str) -> str:
    """The one-line meaning of a code, for summaries and reports."""
    try:
        return Reason(code).meaning  # type: ignore[attr-defined]
    except ValueError:
        return "unknown reason code"
