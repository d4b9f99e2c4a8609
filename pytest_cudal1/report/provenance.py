"""Where an optimizer-made candidate came from: the prompt's text and the exemplars it was shown.

The record's ``origin`` names them by reference only (a prompt file's path and
hash, exemplar database ids), so the report looks them up when it is made: the
prompt from disk, the exemplars in the database given (``--db``). Whatever
cannot be found is said so on the page, never guessed.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any, Mapping

PROMPT_LIMIT = 512 * 1024  # characters embedded per prompt: a page, not a dump


@dataclasses.dataclass
class PromptView:
    """The prompt's text when its file could be read, else why not."""

    path: str | None
    sha256: str | None
    text: str | None = None
    problem: str = ""  # why there is no text, or what is wrong with it


def prompt_view(origin: Mapping[str, Any]) -> PromptView:
    """Read ``origin["prompt_path"]``; a file whose text no longer hashes to ``prompt_sha256`` is flagged."""
    path, sha = origin.get("prompt_path"), origin.get("prompt_sha256")
    view = PromptView(str(path) if path else None, str(sha) if sha else None)
    if not path:
        view.problem = "no prompt recorded"
        return view
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        view.problem = f"prompt file not readable here ({exc.strerror or exc})"
        return view
    if sha and hashlib.sha256(text.encode()).hexdigest() != sha:
        view.problem = "the file changed since: its text does not hash to the recorded prompt_sha256"
    if len(text) > PROMPT_LIMIT:
        text = text[:PROMPT_LIMIT]
        view.problem = (view.problem + "; " if view.problem else "") + f"cut at {PROMPT_LIMIT} characters"
    view.text = text
    return view


@dataclasses.dataclass
class ParentView:
    """One exemplar the prompt showed: a link to its row here, or what the database holds about it."""

    id: int
    row: str | None = None  # anchor of its row in this report's candidate table
    task: str = ""
    candidate: str = ""
    reason: str = ""
    kernel: float | None = None
    call: float | None = None
    code: str | None = None
    problem: str = ""


class ExemplarLookup:
    """The exemplar database, opened for lookups only (a missing file is not created), or why it could not be."""

    def __init__(self, db_path: str | Path | None) -> None:
        self.path = str(db_path) if db_path else None
        self.db: Any = None
        self.problem = "" if db_path else "no exemplar database given (--db)"
        if db_path and not Path(db_path).is_file():
            self.problem = f"no exemplar database at {db_path}"
        elif db_path:
            from policy.exemplars import ExemplarDB, ExemplarDBError  # only a report with a database needs it

            try:
                self.db = ExemplarDB(db_path)
            except ExemplarDBError as exc:
                self.problem = str(exc)

    def close(self) -> None:
        if self.db is not None:
            self.db.close()

    def parent(self, exemplar_id: Any, rows: Mapping[tuple[str, str, str], str]) -> ParentView:
        """Exemplar ``exemplar_id``; ``rows`` maps (GPU, task, candidate hash) to this report's row anchors."""
        try:
            view = ParentView(int(exemplar_id))
        except (TypeError, ValueError):
            return ParentView(-1, problem=f"not an exemplar id: {exemplar_id!r}")
        if self.db is None:
            view.problem = self.problem
            return view
        ex = self.db.get(view.id)
        if ex is None:
            view.problem = f"not in the exemplar database {self.path}"
            return view
        view.task, view.reason = ex.task_id, ex.reason
        view.candidate = str(ex.record.get("candidate_name") or ex.candidate_sha256[:12])
        view.kernel = ex.kernel.speedup if ex.kernel else None
        view.call = ex.call.speedup if ex.call else None
        view.row = rows.get((ex.gpu, ex.task_id, ex.candidate_sha256))
        if view.row is None:
            view.code = ex.code
        return view
