"""Load KernelBench-format tasks from a checkout, a JSONL file, one file, or the bundled set.

A task is a Python source defining ``Model``, ``get_inputs`` and
``get_init_inputs``. Loading only parses the source (it never runs it): the
reference worker is the one place where task code executes. Every problem found
while loading becomes a ``LoadError`` naming the file and line, so one bad
record never hides the others.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
import re
from pathlib import Path
from typing import Iterator

BUNDLED_TASKS = Path(__file__).parent / "tasks"
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
_LEVEL_DIR = re.compile(r"^level_?(\d+)$")
_PROBLEM = re.compile(r"^(\d+)(?:_|$)")


@dataclasses.dataclass(frozen=True)
class Task:
    """One reference problem; ``id`` is what test ids and the ledger show."""

    level: int | None
    problem_id: int | None
    name: str
    source: str
    origin: str  # "path" or "path:line"

    @property
    def id(self) -> str:
        return f"L{self.level}/{self.name}" if self.level is not None else self.name

    @functools.cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class LoadError:
    """A task or candidate that could not be loaded, and why."""

    origin: str
    message: str
    kind: str = "task"  # "task" or "candidate": which input was bad


def missing_definitions(source: str, names: tuple[str, ...]) -> str | None:
    """Return why ``source`` is unusable (syntax error, missing top-level names), or None."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"syntax error at line {exc.lineno}: {exc.msg}"
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.ImportFrom, ast.Import)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    missing = [n for n in names if n not in defined]
    return f"missing top-level {', '.join(missing)}" if missing else None


def parse_problem_id(name: str) -> int | None:
    m = _PROBLEM.match(name)
    return int(m.group(1)) if m else None


def parse_level(dirname: str) -> int | None:
    m = _LEVEL_DIR.match(dirname.lower())
    return int(m.group(1)) if m else None


def _checked(task: Task, errors: list[LoadError]) -> Iterator[Task]:
    why = missing_definitions(task.source, REQUIRED_NAMES)
    if why:
        errors.append(LoadError(task.origin, f"task {task.id}: {why}"))
    else:
        yield task


def load_task_file(path: Path, errors: list[LoadError], level: int | None = None) -> list[Task]:
    """One KernelBench task file; its level comes from a ``levelN`` parent folder."""
    if level is None:
        level = parse_level(path.parent.name)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        errors.append(LoadError(str(path), f"cannot read task file: {exc}"))
        return []
    task = Task(level, parse_problem_id(path.stem), path.stem, source, str(path))
    return list(_checked(task, errors))


def load_task_dir(root: Path, errors: list[LoadError]) -> list[Task]:
    """A KernelBench checkout (``KernelBench/level1/*.py``) or any folder of ``levelN/`` folders."""
    if (root / "KernelBench").is_dir():
        root = root / "KernelBench"
    level_dirs = sorted(d for d in root.iterdir() if d.is_dir() and parse_level(d.name) is not None)
    tasks: list[Task] = []
    if level_dirs:
        for d in level_dirs:
            for f in sorted(d.glob("*.py"), key=_natural_key):
                tasks += load_task_file(f, errors, parse_level(d.name))
    else:
        for f in sorted(root.glob("*.py"), key=_natural_key):
            tasks += load_task_file(f, errors)
    if not tasks and not errors:
        errors.append(LoadError(str(root), "no task files found (expected levelN/*.py or *.py)"))
    return tasks


def load_task_jsonl(path: Path, errors: list[LoadError]) -> list[Task]:
    """Records ``{level, problem_id, name, source}``, one per line (../shared/kernelbench format)."""
    tasks: list[Task] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        errors.append(LoadError(str(path), f"cannot read task file: {exc}"))
        return []
    for lineno, line in enumerate(lines, 1):
        origin = f"{path}:{lineno}"
        if not line.strip():
            errors.append(LoadError(origin, "empty line in JSONL task file"))
            continue
        try:
            rec = json.loads(line)
            source = rec["source"]
            name = str(rec.get("name") or f"line{lineno}")
            level = int(rec["level"]) if rec.get("level") is not None else None
            pid = int(rec["problem_id"]) if rec.get("problem_id") is not None else parse_problem_id(name)
            if not isinstance(source, str):
                raise TypeError("'source' must be a string")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            errors.append(LoadError(origin, f"malformed task record: {type(exc).__name__}: {exc}"))
            continue
        tasks += _checked(Task(level, pid, name, source, origin), errors)
    return tasks


def load_tasks(path: str | Path | None) -> tuple[list[Task], list[LoadError]]:
    """Tasks from ``path`` (checkout, folder, JSONL or .py), or the bundled set when None."""
    errors: list[LoadError] = []
    p = Path(path) if path is not None else BUNDLED_TASKS
    if not p.exists():
        return [], [LoadError(str(p), "task path does not exist")]
    if p.is_dir():
        tasks = load_task_dir(p, errors)
    elif p.suffix == ".jsonl":
        tasks = load_task_jsonl(p, errors)
    elif p.suffix == ".py":
        tasks = load_task_file(p, errors)
    else:
        return [], [LoadError(str(p), "unknown task format (expected a folder, .jsonl or .py)")]
    return tasks, errors


def _natural_key(path: Path) -> tuple[int, str]:
    pid = parse_problem_id(path.stem)
    return (pid if pid is not None else 1 << 30, path.name)
