"""The ``hf:`` backend on the tiny model built in code: n answers per prompt, token counts, truncation."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelbench.loaders import load_tasks
from policy.backends import GenerationRequest, SamplingSettings, make_backend
from policy.parser import NoCode, extract_code
from tiny_model import build_tiny_model

pytest.importorskip("transformers")

TASK = load_tasks(None)[0][0]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def request(prompt: str, n: int) -> GenerationRequest:
    return GenerationRequest(task=TASK, prompt=prompt, prompt_sha256="0" * 64, n=n)


def test_the_tiny_model_round_trips_its_word_level_tokenizer(tiny: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    ids = tokenizer("```python \n class ModelNew(nn.Module): \n ```", add_special_tokens=False)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == ["```python", "\n", "class", "ModelNew(nn.Module):", "\n", "```"]
    assert tokenizer.chat_template


def test_hf_answers_n_completions_per_prompt_with_token_counts(tiny: Path) -> None:
    backend = make_backend(f"hf:{tiny}?device=cpu&dtype=float32")
    settings = SamplingSettings(temperature=1.0, max_tokens=10, seed=0)
    answers = backend.generate([request("write class ModelNew", 3), request("fuse the kernel", 2)], settings)
    assert [len(a) for a in answers] == [3, 2]
    for a in (a for per in answers for a in per):
        assert a.error is None and 0 < a.completion_tokens <= 10
        assert a.finish_reason == ("length" if a.completion_tokens == 10 else "stop")
    # The chat template wraps the prompt: "<user> write class ModelNew <assistant>" is 5 tokens.
    assert {a.prompt_tokens for a in answers[0]} == {5} and {a.prompt_tokens for a in answers[1]} == {5}
    assert len({a.text for a in answers[0]}) > 1  # sampled, not n copies of one answer
    assert backend.generate([request("write class ModelNew", 3)], settings)[0] == answers[0]  # the seed decides
    parsed = [extract_code(a.text) for per in answers for a in per]
    no_code = sum(isinstance(p, NoCode) for p in parsed)
    print(f"hf, tiny model: {no_code}/{len(parsed)} answers without code")
    assert no_code >= len(parsed) - 1  # random weights: word salad, recorded as NO_CODE by the loop


def test_hf_cuts_at_max_tokens_and_says_length(tiny: Path) -> None:
    backend = make_backend(f"hf:{tiny}?device=cpu")
    (answers,) = backend.generate([request("write", 2)], SamplingSettings(temperature=1.0, max_tokens=1, seed=1))
    assert all(a.completion_tokens == 1 for a in answers)
    # One token: cut off ("length"), unless that token was the end of sequence (a "stop" with no text).
    assert all(a.finish_reason == "length" or (a.finish_reason == "stop" and a.text == "") for a in answers)
    assert any(a.finish_reason == "length" for a in answers)
