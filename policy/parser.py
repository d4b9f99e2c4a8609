"""Extract the candidate module from a model's answer.

Answers come fenced or bare, with several blocks (a CUDA source, a snippet, the
final module), cut off mid-block when the token limit hits, behind a
``<think>…</think>`` preamble. The module is the block that defines
``class ModelNew``, the last such (answers refine as they go), preferring one
that parses. An answer with none is a verdict of its round (``NO_CODE``), not
an error: the parser never guesses code into existence.
"""

from __future__ import annotations

import ast
import dataclasses
import re

from pytest_cudal1.reasons import Reason

NO_CODE = Reason.NO_CODE.value

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:^[ \t]*\1[ \t]*$|\Z)",
                    re.DOTALL | re.MULTILINE)
_DEFINES_MODELNEW = re.compile(r"^class\s+ModelNew\b", re.MULTILINE)
_CODE_START = re.compile(r"^(?:import |from \S+ import |class |def |@|#)", re.MULTILINE)
_PYTHON_TAGS = {"", "python", "py", "python3", "py3", "pycon", "ipython"}


@dataclasses.dataclass(frozen=True)
class NoCode:
    """No usable module in the answer; ``reason`` says why, ``code`` is the ledger's reason code."""

    reason: str
    code: str = NO_CODE


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def _pick(blocks: list[str]) -> str | None:
    """The last block that defines ModelNew and parses, else the last that defines it (a truncated one)."""
    defining = [b for b in blocks if _DEFINES_MODELNEW.search(b)]
    parsing = [b for b in defining if _parses(b)]
    return (parsing or defining or [None])[-1]


def _bare_module(text: str) -> str | None:
    """Code written without fences: from the first code-looking line, dropping trailing prose lines."""
    start = _CODE_START.search(text)
    if start is None:
        return None
    lines = text[start.start():].rstrip().splitlines()
    for end in range(len(lines), 0, -1):
        candidate = "\n".join(lines[:end])
        if _DEFINES_MODELNEW.search(candidate) and _parses(candidate):
            return candidate + "\n"
    return None


def extract_code(answer: str) -> str | NoCode:
    """The candidate module in ``answer``, or ``NoCode`` with the reason."""
    if not answer.strip():
        return NoCode("the answer is empty")
    text = _THINK.sub("", answer)
    if re.search(r"<think>", text, re.IGNORECASE):
        return NoCode("the answer ends inside its <think> reasoning (truncated before any code)")
    fenced = [(tag.lower(), body) for _, tag, body in _FENCE.findall(text)]
    if fenced:
        code = _pick([body for tag, body in fenced if tag in _PYTHON_TAGS])
        if code is not None:
            return code.rstrip() + "\n"
        return NoCode(f"none of the {len(fenced)} code block(s) defines class ModelNew")
    code = _bare_module(text)
    return code if code is not None else NoCode("no code block and no bare module defining class ModelNew")
