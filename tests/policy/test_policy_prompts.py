"""Prompt building with the real jinja2 templates: contents, order, contract, user templates, refinement."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from policy.exemplars import ExemplarDB, Origin
from policy.prompts import PromptBuilder, constructor_signature
from policy_records import TASK, code, record
from pytest_cudal1.reasons import Reason

GPU = "NVIDIA H200"


@pytest.fixture
def exemplars(tmp_path: Path):
    """Two stored successes (3.25x and 1.5x), read back from a real database."""
    with ExemplarDB(tmp_path / "x.sqlite") as db:
        for tag, speedup in (("fast-variant", 3.25), ("slow-variant", 1.5)):
            db.add(record(code(tag), speedup=speedup), code(tag), TASK, Origin("test"))
        return db.successes(TASK.sha256, GPU)


def test_contrastive_prompt_has_task_exemplars_sections_contract_and_restrictions(exemplars) -> None:
    prompt = PromptBuilder().contrastive(TASK, exemplars, GPU)
    text = prompt.text
    assert TASK.source.strip() in text and GPU in text
    slow, fast = text.index("# slow-variant"), text.index("# fast-variant")
    assert slow < fast  # slowest first, so the contrast reads upward
    assert "speedup 1.50x" in text[:slow] and "speedup 3.25x" in text[slow:fast]
    assert "(95% interval 3.19-3.31)" in text
    sections = [text.index(s) for s in ("Performance Analysis", "Algorithm Design", "Code Implementation")]
    assert sections == sorted(sections) and sections[0] > fast
    assert "class ModelNew(nn.Module)" in text and "ModelNew(dim: int, scale: float=2.0)" in text
    assert "No caching of results" in text and "hyperparameters or problem sizes" in text
    assert "No precision reduction" in text
    assert prompt.sha256 == hashlib.sha256(text.encode()).hexdigest()


def test_precision_reduction_only_when_the_task_allows_it(exemplars) -> None:
    text = PromptBuilder(allow_precision_reduction=True).contrastive(TASK, exemplars, GPU).text
    assert "No precision reduction" not in text and "allows reduced precision" in text


def test_the_prompt_hash_changes_with_the_exemplars(exemplars) -> None:
    builder = PromptBuilder()
    assert builder.contrastive(TASK, exemplars, GPU).sha256 != builder.contrastive(TASK, exemplars[:1], GPU).sha256
    first = builder.contrastive(TASK, [], GPU)
    assert "Earlier correct implementations" not in first.text and "Code Implementation" in first.text


def test_a_user_template_directory_overrides_one_template(tmp_path: Path, exemplars) -> None:
    (tmp_path / "contrastive.j2").write_text("MY PROMPT for {{ task.id }}\n{% include '_contract.j2' %}")
    text = PromptBuilder(template_dir=tmp_path).contrastive(TASK, exemplars, GPU).text
    assert text.startswith(f"MY PROMPT for {TASK.id}") and "No caching of results" in text  # package include


def test_refinement_prompt_carries_the_previous_verdict_and_both_speedups() -> None:
    previous = code("attempt-1")
    rec = record(previous, reason=Reason.PRECISION_LOSS, speedup=2.0, message="errors at TF32 level",
                 kernels=("ampere_sgemm_128x64_tn", "relu_kernel"))
    rec["call_timing"] = {**rec["timing"], "speedup": 1.75, "speedup_ci": [1.7, 1.8]}
    text = PromptBuilder().refinement(TASK, previous, rec, GPU).text
    assert "# attempt-1" in text and TASK.source.strip() in text
    for expected in ("rejected", "`PRECISION_LOSS`", "errors at TF32 level", "Speedup (kernel time): 2.000x",
                     "Speedup (per call): 1.750x (95% interval 1.700-1.800)", "ampere_sgemm_128x64_tn, relu_kernel"):
        assert expected in text
    assert text.index("Performance Analysis") < text.index("Algorithm Design") < text.index("Code Implementation")


def test_refinement_without_timing_says_so_and_rejects_other_tasks_records() -> None:
    previous = code("crash")
    rec = record(previous, reason=Reason.CRASH, speedup=None)
    text = PromptBuilder().refinement(TASK, previous, rec, GPU).text
    assert "`CRASH`" in text and "Speedup" not in text and "none recorded" in text
    rec["task_id"] = "L9/other"
    with pytest.raises(ValueError, match="L9/other"):
        PromptBuilder().refinement(TASK, previous, rec, GPU)


def test_exemplars_without_a_measured_speedup_are_refused(tmp_path: Path) -> None:
    with ExemplarDB(tmp_path / "x.sqlite") as db:
        db.add(record(code("u"), speedup=None), code("u"), TASK, Origin("test"))
        (untimed,) = db.all()
    with pytest.raises(ValueError, match="no measured speedup"):
        PromptBuilder().contrastive(TASK, [untimed], GPU)


@pytest.mark.parametrize("init, expected", [
    ("def __init__(self):", ""),
    ("def __init__(self, a, b=3, *args, **kw):", "a, b=3, *args, **kw"),
    ("def __init__(self, /, a: int):", "a: int"),
])
def test_constructor_signature(init: str, expected: str) -> None:
    source = f"import torch.nn as nn\n\nclass Model(nn.Module):\n    {init}\n        super().__init__()\n"
    assert constructor_signature(source) == expected
