"""Writing files that others read while they change: the report, the optimizer's folder."""

from __future__ import annotations

import os
from pathlib import Path


def atomic_write(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` so a reader (or a kill) sees the old file or the new one, never a part.

    The text goes to a temporary file beside it (created with the umask's mode, like any file), is
    flushed to disk, then renamed over ``path``; a failed write leaves no temporary file behind.
    Returns the path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
