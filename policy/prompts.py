"""Prompt building from jinja2 templates: the contrastive prompt and the multi-turn refinement prompt.

The wording lives in ``policy/templates/*.j2`` so it can change (or be
replaced: ``template_dir`` is searched first, one file at a time) without code
changes. Each rendered prompt carries the sha256 of its text, which goes into
the candidate's ``Origin`` so an exemplar can be traced to the exact prompt.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
from pathlib import Path
from typing import Any, Sequence

import jinja2

from kernelbench.loaders import Task
from policy.exemplars import Exemplar, measures

TEMPLATES = Path(__file__).parent / "templates"
CONTRASTIVE = "contrastive.j2"
REFINEMENT = "refinement.j2"


@dataclasses.dataclass(frozen=True)
class Prompt:
    """A rendered prompt and what identifies it."""

    text: str
    template: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def constructor_signature(task_source: str) -> str:
    """``Model.__init__``'s parameters without ``self`` (``"in_features, out_features, bias=True"``)."""
    for node in ast.parse(task_source).body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    args = item.args  # a fresh tree: dropping ``self`` in place is safe
                    if args.posonlyargs:
                        args.posonlyargs = args.posonlyargs[1:]
                    else:
                        args.args = args.args[1:]
                    return ast.unparse(args)
    return ""


class PromptBuilder:
    """Renders the package's templates, or a user's, where a file of the same name exists there."""

    def __init__(self, template_dir: str | Path | None = None, allow_precision_reduction: bool = False) -> None:
        loaders = [jinja2.FileSystemLoader(str(template_dir))] if template_dir else []
        self.env = jinja2.Environment(
            loader=jinja2.ChoiceLoader([*loaders, jinja2.FileSystemLoader(str(TEMPLATES))]),
            undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False,
        )
        self.allow_precision_reduction = allow_precision_reduction

    def _render(self, template: str, task: Task, gpu: str, **values: Any) -> Prompt:
        text = self.env.get_template(template).render(
            task=task, gpu=gpu, constructor=constructor_signature(task.source),
            allow_precision_reduction=self.allow_precision_reduction, **values,
        )
        return Prompt(text, template)

    def contrastive(self, task: Task, exemplars: Sequence[Exemplar], gpu: str) -> Prompt:
        """The task with N earlier successes, slowest first, each with the speedup this judge measured."""
        missing = [e.id for e in exemplars if e.speedup is None]
        if missing:
            raise ValueError(f"{task.id}: exemplars {missing} have no measured speedup")
        ordered = sorted(exemplars, key=lambda e: e.speedup or 0.0)
        return self._render(CONTRASTIVE, task, gpu, exemplars=ordered)

    def refinement(self, task: Task, previous_code: str, record: dict[str, Any], gpu: str) -> Prompt:
        """The previous attempt on the same task with its ledger record: verdict, reason, message, speedups, kernels."""
        if record["task_id"] != task.id:
            raise ValueError(f"refinement prompt for {task.id} given a record of {record['task_id']}")
        kernel, call = measures(record)
        return self._render(REFINEMENT, task, gpu, previous_code=previous_code, record=record,
                            kernel=kernel, call=call)
