"""Extracting the candidate module from model answers of every shape seen in practice."""

from __future__ import annotations

import ast

import pytest

from policy.parser import NO_CODE, NoCode, extract_code

MODULE = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
         "        return torch.relu(x)\n"


def fenced(body: str, tag: str = "python") -> str:
    return f"```{tag}\n{body}```\n"


def test_a_fenced_module_after_the_three_sections() -> None:
    answer = "## Performance Analysis\nslow.\n## Algorithm Design\nfuse.\n## Code Implementation\n" + fenced(MODULE)
    assert extract_code(answer) == MODULE


@pytest.mark.parametrize("tag", ["python", "py", "Python", "python3", ""])
def test_language_tags(tag: str) -> None:
    assert extract_code(fenced(MODULE, tag)) == MODULE


def test_the_block_defining_modelnew_is_chosen_among_several() -> None:
    cuda = fenced("__global__ void k(float* x) {}\n", "cuda")
    snippet = fenced("x = torch.relu(x)\n")
    draft = fenced(MODULE.replace("relu", "sigmoid"))
    answer = f"The kernel:\n{cuda}A snippet:\n{snippet}First try:\n{draft}Final:\n{fenced(MODULE)}Done."
    assert extract_code(answer) == MODULE  # the last module that defines ModelNew


def test_a_parsing_block_wins_over_a_later_broken_one() -> None:
    broken = MODULE + "    def oops(self:\n"
    assert extract_code(fenced(MODULE) + fenced(broken)) == MODULE


def test_a_truncated_answer_with_an_unclosed_fence() -> None:
    answer = "## Code Implementation\n```python\n" + MODULE + "\n# still writing"
    code = extract_code(answer)
    assert isinstance(code, str) and "class ModelNew" in code and "```" not in code
    ast.parse(code)


def test_a_reasoning_preamble_is_ignored() -> None:
    thinking = "<think>Maybe:\n" + fenced(MODULE.replace("relu", "tanh")) + "no, relu.</think>\n"
    assert extract_code(thinking + fenced(MODULE)) == MODULE


def test_an_answer_cut_off_inside_its_reasoning_has_no_code() -> None:
    result = extract_code("<think>Let me write\n" + fenced(MODULE))
    assert isinstance(result, NoCode) and "<think>" in result.reason


def test_bare_code_without_fences() -> None:
    answer = "Here is the module:\n\n" + MODULE + "\nThis should be faster because it fuses."
    assert extract_code(answer).strip() == MODULE.strip()


@pytest.mark.parametrize("answer, why", [
    ("", "empty"),
    ("I cannot help with that.", "no code block"),
    (fenced("def f(x):\n    return x\n"), "defines class ModelNew"),
    (fenced("class ModelNew {};\n", "cpp"), "defines class ModelNew"),
])
def test_no_code_has_a_reason_and_the_reason_code(answer: str, why: str) -> None:
    result = extract_code(answer)
    assert isinstance(result, NoCode) and why in result.reason and result.code == NO_CODE == "NO_CODE"
