"""``pytest_cudal1.files.atomic_write``, the one atomic write the report and the optimizer's folder use."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_cudal1.files import atomic_write


def test_a_write_replaces_the_file_whole_and_makes_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "new" / "folder" / "state.json"
    assert atomic_write(path, "first") == path and path.read_text(encoding="utf-8") == "first"
    atomic_write(path, "second ü")
    assert path.read_text(encoding="utf-8") == "second ü"
    assert sorted(p.name for p in path.parent.iterdir()) == ["state.json"]  # no temporary file left


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    atomic_write(path, "old page")
    with pytest.raises(UnicodeEncodeError):
        atomic_write(path, "half a page \ud800")  # a lone surrogate: UTF-8 cannot write it
    assert path.read_text(encoding="utf-8") == "old page"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
