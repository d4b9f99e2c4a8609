"""Find the code a ledger record judged, by its hash.

A ledger line names its candidate (``candidate_origin``: a file, or a JSONL
release's ``path:line``) and its ``candidate_sha256``, but not its code. The code
is read back from that origin, from the judge's cache copy
(``CACHE/sources/<sha256>.py``, written for candidates without a file) or from a
candidate folder/JSONL given to search, and is accepted only if it still hashes
to the judged sha256: a file edited since it was judged is not that candidate.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterable

from pytest_cudal1.candidates import Candidate, load_candidates


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class CodeFinder:
    """Looks candidates up by hash; every file or folder is read at most once."""

    def __init__(self, search: Iterable[str | Path] = ()) -> None:
        self.search = [Path(p) for p in search]
        self._by_sha: dict[str, Candidate] = {}
        self._read: set[Path] = set()

    def find(self, sha256: str, origin: str) -> Candidate | None:
        """The candidate with this hash (with its own reference for release records), or None."""
        self._load(_origin_path(origin))
        for root in self.search:
            if sha256 in self._by_sha:
                break
            copy = root / "sources" / f"{sha256}.py"
            if copy.is_file():
                self._load(copy)
            self._load(root)
        return self._by_sha.get(sha256)

    def _load(self, path: Path | None) -> None:
        if path is None or path in self._read or not path.exists():
            return
        self._read.add(path)
        if path.suffix == ".py" and path.is_file():
            try:
                source = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                return
            self._by_sha.setdefault(_sha256(source), Candidate(path.stem, source, str(path), None, None))
        elif path.suffix == ".jsonl" or (path.is_dir() and any(path.glob("level*"))):
            for cand in load_candidates(path)[0]:
                self._by_sha.setdefault(cand.sha256, cand)


def _origin_path(origin: str) -> Path | None:
    """``path`` or ``path:line`` (a JSONL record) as the file to read; None for foreign origins."""
    if not origin:
        return None
    path = Path(origin)
    if path.exists():
        return path
    head, _, line = origin.rpartition(":")
    return Path(head) if head and line.isdigit() else None
