"""``pytest --help`` lists every cudal1 option and stays light: no torch, no hypothesis engine."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from pytest_cudal1.options import SETTINGS


def test_help_lists_every_option(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    assert result.ret == 0, "\n".join(result.errlines[-20:])
    result.stdout.fnmatch_lines(["*--cudal1 *"])
    for name, *_ in SETTINGS:
        result.stdout.fnmatch_lines([f"*--cudal1-{name}*"])


def test_help_imports_no_torch() -> None:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "pytest", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "torch" not in imported and "jinja2" not in imported


def test_help_states_numeric_defaults(pytester: pytest.Pytester) -> None:
    text = " ".join(pytester.runpytest_subprocess("--help").stdout.str().split())
    for name, kind, default, _ in SETTINGS:
        if kind in ("int", "float") and default is not None:
            assert re.search(rf"--cudal1-{name}=\S+ .*?\(default: {default:g}\)", text), name
