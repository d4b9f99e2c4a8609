"""Which of a candidate's torch extensions failed to build, though the candidate caught the error.

Most CUDA-L1 kernels wrap ``load_inline`` in ``try/except`` and fall back to PyTorch. On the H200, 20 of the
33 ``load_inline`` records judged in session 20 never built their extension. Some name a function in
``functions=`` that their C++ sources do not declare, some define a second ``PYBIND11_MODULE``, and one uses
``AT_CUDA_CHECK``, which torch 2.11 removed. Each then ran its fallback, and was judged OK at 1.00x with nothing
to say that its kernel never ran. ``install`` wraps ``load_inline`` and ``load`` in the candidate worker, before
any candidate code. A build that raises is noted, and the error is raised again, so the candidate sees what it
would see anywhere. The judge puts the notes in the record: a warning, never a verdict. One note per extension,
with the first error and the number of attempts: one release record retried its build at every call, and its
verdict repeated the same failure 18 times (H100, session 25), the later ones only the missing ``.so``.
"""

from __future__ import annotations

import functools
import re
from typing import Any

FAILED: list[dict[str, Any]] = []  # {"extension", "error", "attempts"} per extension whose build raised, in order


def _first_error(exc: BaseException) -> str:
    """The compiler's first ``error:`` line, else the exception's first line."""
    text = str(exc)
    found = re.search(r"error: ?([^\n]*)", text)
    line = found.group(1) if found else (text.splitlines() or [type(exc).__name__])[0]
    return line.strip()[:200]


def _note(extension: str, exc: BaseException) -> None:
    """The first failure of ``extension`` is its error; a later one only counts (it often fails on the first's
    leftovers, e.g. a ``.so`` that was never written)."""
    for failure in FAILED:
        if failure["extension"] == extension:
            failure["attempts"] += 1
            return
    FAILED.append({"extension": extension, "error": _first_error(exc), "attempts": 1})


def install() -> None:
    """Wrap ``torch.utils.cpp_extension.load_inline`` and ``load`` so that a build that raises is noted."""
    from torch.utils import cpp_extension

    for name in ("load_inline", "load"):
        original = getattr(cpp_extension, name)
        if getattr(original, "notes_failures", False):
            continue

        def noted(*args: Any, __original: Any = original, **kwargs: Any) -> Any:
            try:
                return __original(*args, **kwargs)
            except Exception as exc:
                _note(str(kwargs.get("name", args[0] if args else "?")), exc)
                raise

        functools.update_wrapper(noted, original)
        noted.notes_failures = True  # type: ignore[attr-defined]
        setattr(cpp_extension, name, noted)
