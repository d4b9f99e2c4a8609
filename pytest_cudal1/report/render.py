"""The page: number formats, the jinja2 environment over ``templates/``, and writing it."""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from pytest_cudal1.files import atomic_write
from pytest_cudal1.reasons import describe
from pytest_cudal1.records import JudgedRecord
from pytest_cudal1.report.figures import is_number, is_simulated, usable_speedup
from pytest_cudal1.report.loading import gpu_key, is_cheat, kernels_of, status
from pytest_cudal1.report.tables import build_context

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def fmt_ms(v: float | None) -> str:
    return "—" if v is None or not is_number(v) else f"{v:.3g}"


def fmt_seconds(v: float | None) -> str:
    return "" if v is None else f"{v:.3g}"


def fmt_x(v: float | None) -> str:
    return "—" if v is None or not is_number(v) else f"{v:.2f}×"


def fmt_ci(ci: Sequence[float] | None) -> str:
    if not ci or not all(is_number(v) for v in ci):
        return ""
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def fmt_pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


def fmt_date(iso: str | None) -> str:
    """``2025-06-01T10:00:00+00:00`` as ``2025-06-01 10:00 UTC``; anything unparsable as given."""
    if not iso:
        return "—"
    try:
        t = _dt.datetime.fromisoformat(str(iso).replace("Z", "+00:00"))
    except ValueError:
        return str(iso)
    if t.tzinfo is not None:
        return t.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return t.strftime("%Y-%m-%d %H:%M")


def fmt_p(p: float) -> str:
    return f"{p:g}"


def fmt_value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, tuple)) and all(not isinstance(x, (dict, list)) for x in v):
        return "(" + ", ".join(fmt_value(x) for x in v) + ")" if isinstance(v, tuple) else \
            "[" + ", ".join(fmt_value(x) for x in v) + "]"
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, default=str)
    return "—" if v is None else str(v)


def sort_value(v: Any) -> str:
    """A ``data-sort`` attribute value: the full-precision number, or empty when missing."""
    return repr(float(v)) if is_number(v) else ""


def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(date=fmt_date, ms=fmt_ms, seconds=fmt_seconds, x=fmt_x, ci=fmt_ci, pct=fmt_pct, p=fmt_p, value=fmt_value, num=sort_value,
                       first_line=lambda s: (s or "").strip().splitlines()[0] if (s or "").strip() else "")
    env.globals.update(status=status, kernels_of=kernels_of, gpu_key=gpu_key, usable_speedup=usable_speedup,
                       is_simulated=is_simulated,
                       describe=describe, is_cheat=is_cheat)
    return env


def render_report(records: Iterable[JudgedRecord | Mapping[str, Any]], title: str | None = None,
                  sources: Sequence[str] = (), commit: str | None = None,
                  db_path: str | os.PathLike[str] | None = None,
                  metrics_log: str | os.PathLike[str] | None = None) -> str:
    """The report page as a string."""
    context = build_context(records, title, sources, commit, db_path, metrics_log)
    return _environment().get_template("report.html.j2").render(**context)


def build_report(records: Iterable[JudgedRecord | Mapping[str, Any]], out: str | os.PathLike[str],
                 title: str | None = None, *, sources: Sequence[str] = (), commit: str | None = None,
                 db_path: str | os.PathLike[str] | None = None,
                 metrics_log: str | os.PathLike[str] | None = None) -> Path:
    """Write the report for ``records`` (``JudgedRecord`` or ``to_json()`` dicts) to ``out``; return its path.

    ``db_path``: the exemplar database (``--cudal1-db``) where the optimizer view finds the exemplars
    its best candidates were shown. ``metrics_log``: a ``cudal1-train`` run's ``metrics.jsonl``, drawn as
    the Training section's curves (it must exist). The file is replaced atomically, so a reader never sees
    half a page.
    """
    return atomic_write(out, render_report(records, title, sources, commit, db_path, metrics_log))

