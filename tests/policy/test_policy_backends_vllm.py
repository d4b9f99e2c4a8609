"""The ``vllm:`` backend on the tiny model: needs vLLM and a CUDA GPU (not run where it was written)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelbench.loaders import load_tasks
from policy.backends import GenerationRequest, SamplingSettings, make_backend
from tiny_model import build_tiny_model

pytestmark = pytest.mark.gpu
pytest.importorskip("vllm")
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("vLLM needs a CUDA GPU", allow_module_level=True)


def test_vllm_answers_n_completions_per_prompt_with_token_counts(tmp_path: Path) -> None:
    model = build_tiny_model(tmp_path / "model", heads=1)
    backend = make_backend(f"vllm:{model}?gpu_memory_utilization=0.2")
    task = load_tasks(None)[0][0]
    requests = [GenerationRequest(task=task, prompt=p, prompt_sha256="0" * 64, n=n)
                for p, n in (("write class ModelNew", 3), ("fuse the kernel", 2))]
    answers = backend.generate(requests, SamplingSettings(temperature=1.0, max_tokens=10, seed=0))
    assert [len(a) for a in answers] == [3, 2]
    for a in (a for per in answers for a in per):
        assert a.error is None and a.prompt_tokens == 5 and 0 < a.completion_tokens <= 10
        assert a.finish_reason == ("length" if a.completion_tokens == 10 else "stop")
