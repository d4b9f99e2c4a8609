"""The whole optimizer loop with a model behind it: ``hf:`` in process, ``openai:`` against ``transformers serve``.

The tiny model (random weights, word-level tokenizer) answers word salad, so most answers have no code:
each is a ``NO_CODE`` ledger line with its origin and token counts, and the loop goes on to its next round.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudal1_helpers import FAST, read_ledger, run_pytest
from test_policy_backends_openai import tiny_server  # noqa: F401 (a fixture: transformers serve on 127.0.0.1)
from tiny_model import build_tiny_model

pytest.importorskip("transformers")

LOOP = (*FAST, "--cudal1-optimize", "-k", "1_ReLU", "--cudal1-rounds=2", "--cudal1-per-round=2",
        "--cudal1-max-tokens=24", "--cudal1-task-budget=0")


def check_model_run(root: Path, result: pytest.RunResult, backend: str) -> None:
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, text[-4000:]
    lines = read_ledger(root / "cudal1-ledger.jsonl")
    assert len(lines) == 4, [(r["candidate_name"], r["verdict"]["reason"]) for r in lines]
    assert sorted({r["origin"]["round"] for r in lines}) == [1, 2]
    assert all(r["origin"]["backend"].startswith(backend) and r["task_id"] == "L1/1_ReLU" for r in lines)
    assert all(r["origin"]["tokens"]["completion"] for r in lines)  # what each answer cost is kept
    no_code = [r for r in lines if r["verdict"]["reason"] == "NO_CODE"]
    assert no_code and all(r["verdict"]["message"] for r in no_code), lines
    prompt = Path(lines[0]["origin"]["prompt_path"]).read_text(encoding="utf-8")
    assert "class ModelNew" in prompt and "Performance Analysis" in prompt
    assert "NO_CODE" in text and "cudal1 optimizer" in text  # the verdict table and the per-task table
    state = json.loads(next((root / "cudal1-optimized").glob("level1/*/optimizer-state.json")).read_text())
    assert state["rounds_done"] == 2
    print(f"{backend}: {len(no_code)} of {len(lines)} answers without code")


@pytest.mark.slow
def test_the_hf_backend_runs_the_loop_and_answers_without_code_are_recorded(tmp_path: Path) -> None:
    model = build_tiny_model(tmp_path / "model")
    result = run_pytest(tmp_path, *LOOP, f"--cudal1-policy=hf:{model}?device=cpu", timeout=900)
    check_model_run(tmp_path, result, "hf:")


@pytest.mark.slow
def test_the_openai_backend_runs_the_loop_against_transformers_serve(tiny_server, tmp_path: Path) -> None:  # noqa: F811
    url, model = tiny_server
    result = run_pytest(tmp_path, *LOOP, f"--cudal1-policy=openai:{url}?model={model}&timeout=60&retries=1",
                        timeout=900)
    check_model_run(tmp_path, result, "openai:")
