"""The generation backend interface: prompts in, n completions each out.

The optimizer loop talks only to ``GenerationBackend``: a language model behind
an API (``openai:``), a local model (``hf:``), or the built-in rewrites, which
need no model. Every backend answers in text that goes through the same
``policy.parser`` and the same judge, so the loop has one path. A backend
reports its failures (a timeout, a refused request) per completion in
``error``: a failed generation is a verdict of its round, never a crash of the run.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Protocol, Sequence

from kernelbench.loaders import Task
from policy import builtin


@dataclasses.dataclass(frozen=True)
class SamplingSettings:
    """What a model backend samples with; the built-in backend uses only ``seed``."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 8192
    seed: int | None = None


@dataclasses.dataclass(frozen=True)
class GenerationRequest:
    """One prompt for one task, asking for ``n`` completions.

    ``exemplar_codes`` are the codes the prompt shows (best first), so a backend
    that does not read prompts (the built-in one) can still build on them.
    """

    task: Task
    prompt: str
    prompt_sha256: str
    n: int = 1
    exemplar_codes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Completion:
    """One answer, its token counts (None where the backend has no tokens) and why it ended."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"  # "stop", "length" (truncated), "error"
    error: str | None = None


class GenerationBackend(Protocol):
    """``generate`` answers each request with exactly ``request.n`` completions, in request order."""

    name: str

    def generate(self, requests: Sequence[GenerationRequest], settings: SamplingSettings) -> list[list[Completion]]:
        ...


class BuiltinBackend:
    """The built-in rewrites as a backend: first-round single steps, then combinations of the exemplars' steps.

    The exemplars a request carries are the best codes so far; their first line
    names their built-in steps (``builtin.steps_of``), and the next proposals are
    unions of those steps not yet shown. Each answer is the rewrite in a fenced
    block, so it is parsed like a model's.
    """

    name = "builtin"

    def generate(self, requests: Sequence[GenerationRequest], settings: SamplingSettings) -> list[list[Completion]]:
        rng = random.Random(settings.seed)
        return [self._answer(request, rng) for request in requests]

    def _answer(self, request: GenerationRequest, rng: random.Random) -> list[Completion]:
        shown = [builtin.Rewrite(steps) for code in request.exemplar_codes
                 if (steps := builtin.steps_of(code)) is not None]
        # Exemplars come best first: rank them so next_round combines the best; untried single steps follow.
        combos = builtin.next_round({r: float(len(shown) - i) for i, r in enumerate(shown)})
        singles = [r for r in builtin.first_round(request.task) if r not in shown and r not in combos]
        rng.shuffle(singles)
        proposals = combos + singles
        answers = [f"```python\n{builtin.render(request.task, r)}\n```\n" for r in proposals[: request.n]]
        return [Completion(text) for text in answers] + \
            [Completion("", finish_reason="error", error="the built-in policy has no further rewrite for this task")
             for _ in range(request.n - len(answers))]


def make_backend(spec: str) -> GenerationBackend:
    """The backend a ``--cudal1-policy`` spec names; this version knows only ``builtin``."""
    if spec == "builtin":
        return BuiltinBackend()
    raise ValueError(f"unknown policy {spec!r} (known: builtin)")
