"""What the trainer trains in: where a task's prompt comes from and how an answer becomes code.

``ContrastiveEnvironment`` is CUDA-L1's: the prompt shows N earlier successes
of the task, drawn by the bucket sampler from the exemplar database *at the
moment the prompt is drawn* (so it improves as the database grows), and the
answer is parsed for ``class ModelNew``. ``MenuEnvironment`` offers a fixed list
of real candidate programs for one task; an answer names one, and that program
is what the judge runs. It lets a model too small to write code learn from the
real judge's verdicts (the CPU learning test, a GPU smoke run).
"""

from __future__ import annotations

import hashlib
import random
import re
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

from kernelbench.loaders import Task
from policy.exemplars import ExemplarDB, Exemplar
from policy.parser import NoCode, extract_code
from policy.prompts import PromptBuilder
from policy.sampler import BucketSampler


class Environment(Protocol):
    tasks: Sequence[Task]

    def prompt(self, task: Task) -> dict[str, Any]:
        """A dataset row: ``prompt`` (text or chat messages), ``task_id``, ``prompt_sha256``, ``parents``."""

    def to_code(self, text: str) -> str | NoCode:
        """The candidate module the answer gives, or why there is none."""

    def answer(self, code: str) -> str | None:
        """The answer that gives ``code`` (an SFT target), or None when this environment cannot say it."""


def _row(text: str, task: Task, parents: Sequence[int], sha: str, chat: bool) -> dict[str, Any]:
    prompt: Any = [{"role": "user", "content": text}] if chat else text
    return {"prompt": prompt, "task_id": task.id, "prompt_sha256": sha, "parents": list(parents)}


class ContrastiveEnvironment:
    """The contrastive prompt with exemplars bucket-sampled from the database; answers parsed for ModelNew."""

    def __init__(self, tasks: Sequence[Task], db: ExemplarDB, gpu: str, builder: PromptBuilder,
                 sampler: BucketSampler[Exemplar], rng: random.Random, chat: bool = False) -> None:
        self.tasks, self.db, self.gpu = list(tasks), db, gpu
        self.builder, self.sampler, self.rng, self.chat = builder, sampler, rng, chat

    def prompt(self, task: Task) -> dict[str, Any]:
        exemplars = self.sampler.sample(self.db.successes(task.sha256, self.gpu), self.rng)
        rendered = self.builder.contrastive(task, exemplars, self.gpu)
        return _row(rendered.text, task, [e.id for e in exemplars], rendered.sha256, self.chat)

    def to_code(self, text: str) -> str | NoCode:
        return extract_code(text)

    def answer(self, code: str) -> str:
        return f"```python\n{code.rstrip()}\n```\n"


class MenuEnvironment:
    """One task, one fixed prompt, named real programs: the first program name in an answer is judged."""

    def __init__(self, task: Task, prompt: str, programs: Mapping[str, str], chat: bool = False) -> None:
        self.tasks = [task]
        self.text, self.programs, self.chat = prompt, dict(programs), chat
        self._names = re.compile(r"\b(" + "|".join(map(re.escape, sorted(self.programs, key=len, reverse=True)))
                                 + r")\b")

    @classmethod
    def from_files(cls, task: Task, prompt: str, programs: Mapping[str, str], chat: bool = False) -> "MenuEnvironment":
        return cls(task, prompt, {name: Path(path).read_text(encoding="utf-8") for name, path in programs.items()},
                   chat)

    def prompt(self, task: Task) -> dict[str, Any]:
        return _row(self.text, task, [], hashlib.sha256(self.text.encode()).hexdigest(), self.chat)

    def to_code(self, text: str) -> str | NoCode:
        found = self._names.search(text)
        if found is None:
            return NoCode(f"the answer names none of the programs {sorted(self.programs)}")
        return self.programs[found.group(1)]

    def answer(self, code: str) -> str | None:
        return next((name for name, c in self.programs.items() if c == code), None)
