"""Shared helpers for the plugin's own tests: fixture files, fast judging options, ledger reading.

Every judging test runs pytest for real (``pytester`` or a plain subprocess),
with real worker processes and real files; nothing is mocked. Judging is slow
on a CPU-only machine (each worker imports torch), so the options below keep
trials and timing to a minimum, and tests that need the same run share it
through a module-scoped fixture.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

# Test modules import these helpers as ``cudal1_helpers``: a plain ``from conftest import``
# would pick up whichever conftest.py pytest loaded last (tests/cheats/ has its own).
sys.modules.setdefault("cudal1_helpers", sys.modules[__name__])

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
FIXTURE_TASKS = FIXTURES / "tasks"
FIXTURE_CANDIDATES = FIXTURES / "candidates"

# The knobs that make one judged pair cost little more than its worker start-up.
FAST = (
    "--cudal1-trials=2",
    "--cudal1-time-budget=0.3",
    "--cudal1-min-pairs=3",
    "--cudal1-max-pairs=6",
    "--cudal1-seed=1",
    "--cudal1-call-timeout=20",
)


def shared_dir() -> Path | None:
    """The ``shared/`` folder next to the checkout (CI clones the repo beside it), if any."""
    for candidate in (REPO.parent / "shared", Path("/work/shared")):
        if candidate.is_dir():
            return candidate
    return None


# ---------------------------------------------------------------- writing ---

TASK_TEMPLATE = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self{init_args}):
        super().__init__()
{init_body}

    def forward(self, x):
{forward}


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return [{init_inputs}]
'''


def task_source(forward: str = "return torch.relu(x)", shape: str = "4, 8", init_args: str = "",
                init_body: str = "pass", init_inputs: str = "") -> str:
    """A small KernelBench-format task; ``forward``/``init_body`` are the bodies, unindented."""
    return TASK_TEMPLATE.format(
        init_args=init_args,
        init_body=textwrap.indent(textwrap.dedent(init_body).strip(), " " * 8),
        forward=textwrap.indent(textwrap.dedent(forward).strip(), " " * 8),
        shape=shape,
        init_inputs=init_inputs,
    )


def candidate_source(forward: str = "return torch.relu(x)", header: str = "") -> str:
    """A small candidate module defining ``ModelNew``; ``header`` goes after the imports."""
    return (
        "import torch\nimport torch.nn as nn\n\n"
        + textwrap.dedent(header).strip() + "\n\n\n"
        + "class ModelNew(nn.Module):\n    def forward(self, x):\n"
        + textwrap.indent(textwrap.dedent(forward).strip(), " " * 8) + "\n"
    )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_task(root: Path, level: int, name: str, source: str | None = None) -> Path:
    """``root/levelN/name.py``."""
    return write(root / f"level{level}" / f"{name}.py", source if source is not None else task_source())


def write_candidate(root: Path, level: int, problem: str, name: str, source: str | None = None) -> Path:
    """``root/levelN/<problem>/<name>.py``."""
    return write(root / f"level{level}" / problem / f"{name}.py",
                 source if source is not None else candidate_source())


def write_jsonl(path: Path, records: list[Any]) -> Path:
    """One JSON value per line; a ``str`` record is written as the raw line."""
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    return write(path, "\n".join(lines) + "\n")


# ---------------------------------------------------------------- reading ---

def read_ledger(path: Path) -> list[dict[str, Any]]:
    """Every line of a ledger as JSON (fails on a torn line: tests expect complete ones)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def by_candidate(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{"<task id>::<candidate>": record}``."""
    return {f"{r['task_id']}::{r['candidate_name']}": r for r in records}


def reason(record: dict[str, Any]) -> str:
    return record["verdict"]["reason"]


# ---------------------------------------------------------------- running ---

def run_pytest(cwd: Path, *args: str, timeout: float = 400, env: dict[str, str] | None = None) -> pytest.RunResult:
    """pytest as a real subprocess in ``cwd``, for runs shared by several tests (module fixtures).

    ``pytester`` is function-scoped, so a run whose results many parametrized
    tests read is started this way instead; the result has the same API.
    ``env``: variables set for that run (and so for its workers).
    """
    env = {**{k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}, **(env or {})}
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    )
    return pytest.RunResult(proc.returncode, proc.stdout.splitlines(), proc.stderr.splitlines(),
                            time.monotonic() - t0)


@pytest.fixture
def judge_run(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory):
    """``judge_run(*args)`` -> (RunResult, ledger records of that run), with the fast options.

    Each call uses the pytester directory (so ``--lf`` state carries over
    between calls of one test) and a cache directory private to the test.
    """
    cache = tmp_path_factory.mktemp("cudal1-cache")
    ledger = pytester.path / "cudal1-ledger.jsonl"

    def run(*args: str, timeout: float = 300) -> tuple[pytest.RunResult, list[dict[str, Any]]]:
        before = len(read_ledger(ledger))
        result = pytester.runpytest_subprocess(*FAST, f"--cudal1-cache-dir={cache}", *args, timeout=timeout)
        return result, read_ledger(ledger)[before:]

    return run


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache directory for the whole session: compiled C++ builds are reused across tests."""
    return tmp_path_factory.mktemp("cudal1-session-cache")
