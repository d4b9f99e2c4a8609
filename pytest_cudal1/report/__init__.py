"""One self-contained HTML report of speedups per GPU, from ledgers or saved benchmark runs.

``build_report(records, out)`` writes the page; ``pytest --cudal1-html=FILE`` calls
it at the end of a run and ``cudal1-report OUT.html LEDGER_OR_DIR ...`` (also
``python -m pytest_cudal1.report``) merges existing files into one page.

Every figure is computed here, one small function each, and the templates in
``templates/`` only lay them out (jinja2, autoescaped). The page fetches
nothing: styles, the sorting/filtering script and the SVG charts are inline.

Conventions, also stated in the page:

* A record's GPU is ``environment["gpu"]``, or ``"cpu"`` without one.
* The same candidate (task, name, source hash) judged more than once on one GPU
  counts once: its latest judgement (``judged_at``, then input order) is used.
* ``BACKEND_UNAVAILABLE`` records are skipped, not judged: they count nowhere.
* fast_p (KernelBench): the share of judged tasks with a correct candidate
  whose speedup is greater than p; fast_0 is the share of tasks solved at all.
  A per-task figure uses the task's best correct candidate (highest speedup).
* Mean, median and geometric-mean speedups are over correct candidates.
* Triton and Numba results without a GPU ran under a simulator: they count as
  correct, but their speedups count nowhere (they are marked ``simulated``).
* A rejection is a *cheat* when its code is not one of the honest failures
  below (loading, building, running, wrong values): the anti-cheat codes.

The package, one concern per module: ``loading`` (records in and how each is
classed), ``figures`` (statistics), ``charts`` (SVG geometry), ``tables`` (the
page's rows and context), ``optimizer`` (the optimizer's view: best speedup by
round against the built-in baselines, and where each best came from),
``training`` (``cudal1-train``'s metrics log as curves per stage, with ``metrics_log=``),
``render`` (formats, templates, writing the page through ``pytest_cudal1.files``) and ``cli``.
"""

from pytest_cudal1.report.charts import LogAxis, histogram, task_order
from pytest_cudal1.report.cli import main
from pytest_cudal1.report.figures import (FAST_P, GroupStats, best_correct, best_per_task, clocks_seen,
                                          correct_speedups, fast_p, geomean, gpus_of, is_simulated, judged, latest,
                                          mean, median, rejections_by_reason, stats_by_gpu, usable_speedup)
from pytest_cudal1.report.loading import (HONEST_FAILURES, gpu_key, input_files, is_cheat, kernels_of, read_records,
                                          record_from, records_from_benchmark_run, status)
from pytest_cudal1.report.render import build_report, render_report
from pytest_cudal1.report.tables import build_context

__all__ = [
    "FAST_P", "HONEST_FAILURES", "GroupStats", "LogAxis", "best_correct", "best_per_task", "build_context",
    "build_report", "clocks_seen", "correct_speedups", "fast_p", "geomean", "gpu_key", "gpus_of", "histogram",
    "input_files", "is_cheat", "is_simulated", "judged", "kernels_of", "latest", "main", "mean", "median",
    "read_records", "record_from", "records_from_benchmark_run", "rejections_by_reason", "render_report",
    "stats_by_gpu", "status", "task_order", "usable_speedup",
]
