"""Load candidate kernels and pair them with tasks.

Candidates come from a folder laid out by level and problem::

    ROOT/level1/19_ReLU/fast.py        -> candidate "fast" for L1 problem 19
    ROOT/level1/19_my_try.py           -> candidate "19_my_try" for L1 problem 19

or from a JSONL file whose records carry the candidate source (``custom_code``,
``code`` or ``source``), the problem (``level``/``level_id`` and
``problem_id``/``task_id``), optionally a ``name`` and optionally the reference
source (``ref_code``) — the form published kernel releases ship in, so a
release can be re-judged without a task set. Loading never runs candidate code.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from kernelbench.loaders import LoadError, Task, missing_definitions, parse_level, parse_problem_id

BACKENDS = ("torch", "cpp", "cuda", "triton", "cupy", "numba")
GPU_ONLY_BACKENDS = ("cuda", "cupy")
# Without a GPU these run under a simulator (TRITON_INTERPRET=1, NUMBA_ENABLE_CUDASIM=1): a correctness
# check only, their times say nothing about the kernel.
SIMULATED_WITHOUT_GPU = ("triton", "numba")
# What a candidate worker imports at start-up, before any candidate code (``runtime.warm_start``): its
# backend's libraries, and the profiler's Python module (no CUPTI until ``profile``).
BACKEND_LIBRARIES = {"cpp": ("torch.utils.cpp_extension",), "cuda": ("torch.utils.cpp_extension",),
                     "triton": ("triton",), "cupy": ("cupy",), "numba": ("numba", "numba.cuda")}
PRELOADED_ALWAYS = ("torch.profiler",)


def preloaded(backend: str) -> tuple[str, ...]:
    """The libraries a worker for a candidate of ``backend`` imports before its first request."""
    return PRELOADED_ALWAYS + BACKEND_LIBRARIES.get(backend, ())


def simulated(backend: str, device: str) -> bool:
    """Did this candidate run under a CPU simulator (its speedup is not a speed)?"""
    return device == "cpu" and backend in SIMULATED_WITHOUT_GPU


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One untrusted candidate source for one problem."""

    name: str
    source: str
    origin: str
    level: int | None
    problem_id: int | None
    path: str | None = None  # the real file, when it has one (Triton needs a file)
    task: Task | None = None  # the reference it carries itself (release records)

    @functools.cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    @functools.cached_property
    def backend(self) -> str:
        """Parsed once: markers, builds, availability and the record all ask."""
        return detect_backend(self.source)


def _gpu_keywords(call: ast.Call) -> set[str]:
    """The keywords of an extension call, less ``with_cuda`` when it is a literal False or None."""
    return {k.arg for k in call.keywords if k.arg and not (
        k.arg == "with_cuda" and isinstance(k.value, ast.Constant) and not k.value.value)}


def detect_backend(source: str) -> str:
    """Name the candidate's kernel technology from its imports and calls (never runs it)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "torch"
    modules: set[str] = set()
    calls: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module.split(".")[0])
            if node.module.startswith("torch.utils.cpp_extension"):
                modules.add("cpp_extension")
        elif isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name in ("load_inline", "load"):
                calls.setdefault(name, set()).update(_gpu_keywords(node))
    if "load_inline" in calls:  # CUDA sources, or CUDA code passed as C++ sources with with_cuda=True
        return "cuda" if calls["load_inline"] & {"cuda_sources", "with_cuda"} else "cpp"
    if "load" in calls and "cpp_extension" in modules:
        return "cuda"
    for backend in ("triton", "cupy", "numba"):
        if backend in modules:
            return backend
    return "torch"


def reference_candidate(task: Task) -> Candidate:
    """The task's own Model, judged as a candidate: a sanity check and a speedup-1 baseline."""
    source = task.source + "\n\nModelNew = Model\n"
    return Candidate("reference", source, task.origin, task.level, task.problem_id)


def load_candidate_dir(root: Path, errors: list[LoadError]) -> list[Candidate]:
    found: list[Candidate] = []
    level_dirs = sorted(d for d in root.iterdir() if d.is_dir() and parse_level(d.name) is not None)
    if not level_dirs:
        errors.append(LoadError(str(root), "no levelN/ folders in the candidate folder", "candidate"))
    for ldir in level_dirs:
        level = parse_level(ldir.name)
        for entry in sorted(ldir.iterdir()):
            pid = parse_problem_id(entry.name)
            if pid is None:
                continue
            if entry.is_dir():
                files = [(f.stem, f) for f in sorted(entry.glob("*.py"))]
            elif entry.suffix == ".py":
                files = [(entry.stem, entry)]
            else:
                continue
            for name, f in files:
                try:
                    source = f.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    errors.append(LoadError(str(f), f"cannot read candidate: {exc}", "candidate"))
                    continue
                found.append(Candidate(name, source, str(f), level, pid, path=str(f.resolve())))
    return found


NO_CODE = ("", "None")  # CUDA-L1's release writes "None" where it has no kernel


def _first(rec: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if rec.get(k) is not None:
            return rec[k]
    return None


def load_candidate_jsonl(path: Path, errors: list[LoadError]) -> list[Candidate]:
    found: list[Candidate] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        errors.append(LoadError(str(path), f"cannot read candidate file: {exc}", "candidate"))
        return []
    for lineno, line in enumerate(lines, 1):
        origin = f"{path}:{lineno}"
        if not line.strip():
            errors.append(LoadError(origin, "empty line in JSONL candidate file", "candidate"))
            continue
        try:
            rec = json.loads(line)
            source = _first(rec, "custom_code", "code", "source")
            if not isinstance(source, str) or source.strip() in NO_CODE:
                raise ValueError('no code: custom_code, code and source are all missing, null, empty or "None"')
            level = _first(rec, "level", "level_id")
            pid = _first(rec, "problem_id", "task_id")
            level = int(level) if level is not None else None
            pid = int(pid) if pid is not None else None
            name = str(rec.get("name") or f"line{lineno}")
            ref = rec.get("ref_code")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            errors.append(LoadError(origin, f"malformed candidate record: {type(exc).__name__}: {exc}", "candidate"))
            continue
        task = None
        if isinstance(ref, str):
            task_name = str(rec.get("task_name") or f"{pid}_{rec.get('op_name') or 'task'}")
            task = Task(level, pid, task_name, ref, origin)
            why = missing_definitions(ref, ("Model", "get_inputs", "get_init_inputs"))
            if why:
                errors.append(LoadError(origin, f"ref_code of candidate {name}: {why}", "candidate"))
                continue
        found.append(Candidate(name, source, origin, level, pid, task=task))
    return found


def load_candidates(path: str | Path) -> tuple[list[Candidate], list[LoadError]]:
    """Candidates from a levelN/ folder or a JSONL file."""
    errors: list[LoadError] = []
    p = Path(path)
    if not p.exists():
        return [], [LoadError(str(p), "candidate path does not exist", "candidate")]
    if p.is_dir():
        return load_candidate_dir(p, errors), errors
    if p.suffix == ".jsonl":
        return load_candidate_jsonl(p, errors), errors
    return [], [LoadError(str(p), "unknown candidate format (expected a levelN/ folder or .jsonl)", "candidate")]


def pair(tasks: list[Task], candidates: list[Candidate] | None) -> tuple[list[tuple[Task, Candidate]], list[Candidate]]:
    """Match candidates to tasks by (level, problem_id); no candidates means judge each reference.

    Returns the pairs and the candidates whose problem is not in ``tasks``
    (not an error: the user may have chosen a subset of tasks).
    """
    if candidates is None:
        return [(t, reference_candidate(t)) for t in tasks], []
    by_key = {(t.level, t.problem_id): t for t in tasks}
    pairs: list[tuple[Task, Candidate]] = []
    unmatched: list[Candidate] = []
    for c in candidates:
        task = c.task or by_key.get((c.level, c.problem_id))
        if task is None:
            unmatched.append(c)
        else:
            pairs.append((task, c))
    pairs.sort(key=lambda tc: (tc[0].level or 0, tc[0].problem_id or 0, tc[0].name, tc[1].name))
    return pairs, unmatched
