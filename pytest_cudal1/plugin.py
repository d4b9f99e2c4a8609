"""The pytest plugin: its hooks, the per-run session, collection, the terminal summary.

Hooks only; the settings are in ``options``, the items in ``items``, the work is delegated
(``judge``, ``ledger``, ``summary``, ``optimize``). Nothing
heavy is imported at start-up, so ``pytest --help`` stays fast. Judging starts
when a task or candidate path is given (option or ini) or with ``--cudal1``
for the bundled set; then, unless test paths are named on the command line,
only the judged items are collected.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Any

import pytest

from pytest_cudal1.items import JudgedItem, LoadErrorCollector, LoadErrorItem, TaskCollector
from pytest_cudal1.options import SETTINGS, allowed_globals, custom_kernels_only, enabled, setting, speedup_measure

DIST_LEFT_DEFAULT = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Any:
    """Note whether ``--dist`` was left unset, before pytest-xdist fills in its default (load)."""
    config.stash[DIST_LEFT_DEFAULT] = getattr(config.option, "dist", "no") == "no"
    return (yield)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` while judging: one worker per visible GPU (xdist's own count without a GPU)."""
    from pytest_cudal1.scheduling import visible_gpus

    return (len(visible_gpus()) or None) if enabled(config) else None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``-n N`` with no ``--dist`` while judging: a task's candidates back to back on one worker."""
    if enabled(config) and config.stash.get(DIST_LEFT_DEFAULT, False) and config.getvalue("dist") == "load":
        from pytest_cudal1.scheduling import make_task_scheduler

        return make_task_scheduler(config, log)
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cudal1", "pytest-cudal1: judge GPU kernel candidates")
    group.addoption("--cudal1", action="store_true", default=False,
                    help="judge the bundled task set (implied by --cudal1-tasks/--cudal1-candidates)")
    for name, kind, default, help_text in SETTINGS:
        ini = f"cudal1_{name.replace('-', '_')}"
        if kind in ("int", "float") and default is not None:
            help_text = f"{help_text} (default: {default:g})"
        if kind == "bool":
            group.addoption(f"--cudal1-{name}", dest=ini, action="store_const", const="true", default=None,
                            help=f"{help_text} [ini: {ini}]")
        else:
            group.addoption(f"--cudal1-{name}", dest=ini, default=None, help=f"{help_text} [ini: {ini}]")
        parser.addini(ini, help=help_text, type="string", default=None if default is None else str(default))


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark opens its storage
def pytest_configure(config: pytest.Config) -> None:
    # Not "cudal1": -k matches marker names by substring, and "-k L1" would then select every item.
    config.addinivalue_line("markers", "judged: a judged (task, candidate) pair")
    config.addinivalue_line("markers", "optimize: a task the optimizer works on (--cudal1-optimize)")
    for level in range(1, 5):
        config.addinivalue_line("markers", f"level{level}: KernelBench level {level} task")
    from pytest_cudal1.candidates import BACKENDS

    for backend in BACKENDS:
        config.addinivalue_line("markers", f"backend_{backend}: candidate written with {backend}")
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped without one")
    if enabled(config):
        from pytest_cudal1 import benchmark_bridge

        if config.pluginmanager.hasplugin("benchmark"):  # works with -p no:benchmark too
            benchmark_bridge.configure(config, show_tables=setting(config, "benchmark-tables"))
        from pytest_cudal1.scheduling import assign_gpu_to_xdist_worker, check_workers_fit_gpus

        if setting(config, "ray") and getattr(config.option, "numprocesses", None):
            raise pytest.UsageError("--cudal1-ray and -n: choose one (Ray actors already judge in parallel)")
        check_workers_fit_gpus(config)
        assign_gpu_to_xdist_worker(config)
        session = CudaL1Session(config)
        session.selection = take_item_ids(config)
        config.pluginmanager.register(session, "cudal1-session")
        if setting(config, "optimize"):  # registered after the session: its table prints after the verdicts
            from pytest_cudal1.optimize import PLUGIN, OptimizerPlugin

            config.pluginmanager.register(OptimizerPlugin(config), PLUGIN)


ITEM_ID = re.compile(r"^L\d+/[^:\s]+(::.+)?$")


def take_item_ids(config: pytest.Config) -> list[str]:
    """Command-line args that name judged items (``L1/19_ReLU::fast``, ``L1/19_ReLU``), not paths.

    pytest would look for them as files; they are taken out of ``config.args`` and select items after
    collection instead, so an id the summary printed can be pasted back. An arg that is a real path stays one.
    """
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        return []
    here = Path(config.invocation_params.dir)
    ids = [a for a in config.args if ITEM_ID.match(a) and not (here / a.split("::")[0]).exists()]
    if ids:
        config.args = [a for a in config.args if a not in ids]
        if not config.args:  # only ids: collect the judged items and nothing else, as with no args
            config.args = [str(here)]
            config.args_source = pytest.Config.ArgsSource.INVOCATION_DIR
    return ids


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With judging on and no test paths named, collect only the judged items."""
    if enabled(config) and config.args_source is not pytest.Config.ArgsSource.ARGS:
        return True
    return None


def builds_last(groups: list[tuple[str, list[Any]]]) -> list[tuple[str, list[Any]]]:
    """Tasks in the order judged: on a GPU machine, those with a candidate to compile after the others, so its
    build runs on the CPU while they are judged (H200: one ``load_inline`` build was 50 s of a 155 s batch
    judged in listed order). Otherwise, and among each kind, as listed; a task's candidates stay together.
    On a CPU machine the order is kept: timing waits for every build there anyway."""
    from pytest_cudal1 import environment
    from pytest_cudal1.builds import COMPILED_BACKENDS

    if not environment.gpu_facts():
        return groups
    return sorted(groups, key=lambda group: any(c.backend in COMPILED_BACKENDS for _, c in group[1]))


class CudaL1Session:
    """Per-run state: items, the judge, the records seen; registered only when judging."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        seed = setting(config, "seed")
        self.seed = int(seed) if seed is not None else secrets.randbelow(2**31)
        cache = setting(config, "cache-dir")
        # Absolute: workers run in their build folders and must find sources and builds from there.
        self.cache_dir = (Path(config.invocation_params.dir) / cache).resolve() if cache else \
            Path(config.rootpath) / ".cudal1_cache"
        self.ledger_path = Path(setting(config, "ledger"))
        if not self.ledger_path.is_absolute():
            self.ledger_path = Path(config.invocation_params.dir) / self.ledger_path
        self.allow_global = allowed_globals(config)  # refused at start-up, not after collection
        self.custom_kernels_only = custom_kernels_only(config)
        self.records: list[dict[str, Any]] = []
        self.unmatched: list[Any] = []
        self.searched = ""  # the task set(s) candidates were matched against, for the unmatched message
        self.selection: list[str] = []  # item ids named on the command line
        self.progress: Any = None
        self.html_path: Path | None = None
        self._judge: Any = None
        self.remote: Any = None  # the Ray cluster's judges (``ray_judge.RayJudge``), with --cudal1-ray

    # -------------------------------------------------------- collection ---

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        """Add the judged items through ``genitems`` so counts, ``-k``, ``-m`` and ``--lf`` see them."""
        for collector in self._collectors(session):
            items.extend(session.genitems(collector))
        if self.selection:
            from pytest_cudal1.optimize import OptimizeItem

            keep = [i for i in items if not isinstance(i, (JudgedItem, LoadErrorItem, OptimizeItem))
                    or self._selected(i.nodeid)]
            config.hook.pytest_deselected(items=[i for i in items if i not in keep])
            items[:] = keep

    def _selected(self, nodeid: str) -> bool:
        return any(nodeid == s or nodeid.startswith(s + "::") for s in self.selection)

    def _collectors(self, session: pytest.Session) -> list[pytest.Collector]:
        from kernelbench.loaders import BUNDLED_TASKS, load_tasks
        from pytest_cudal1.candidates import load_candidates, pair

        tasks_path = setting(self.config, "tasks")
        cands_path = setting(self.config, "candidates")
        for option, path in (("tasks", tasks_path), ("candidates", cands_path)):
            if path and not (Path(self.config.invocation_params.dir) / path).exists():
                raise pytest.UsageError(f"--cudal1-{option}: {path} does not exist")
        # Without --cudal1-tasks the bundled set is the task set, for your candidates too.
        tasks, errors = load_tasks(tasks_path)
        self.searched = f"--cudal1-tasks={tasks_path}" if tasks_path else f"the bundled set ({BUNDLED_TASKS})"
        optimize = setting(self.config, "optimize")
        if optimize and cands_path:
            raise pytest.UsageError("--cudal1-optimize makes its own candidates: drop --cudal1-candidates")
        if cands_path:
            candidates, cerrors = load_candidates(cands_path)
            errors += cerrors
        elif tasks_path is None and not optimize:
            candidates, cerrors = load_candidates(BUNDLED_TASKS.parent / "candidates")
            errors += cerrors
        else:
            candidates = None
        levels = setting(self.config, "level")
        if levels:
            try:
                wanted = {int(x) for x in str(levels).split(",") if x.strip()}
            except ValueError:
                raise pytest.UsageError(f"--cudal1-level: expected comma-separated numbers, got {levels!r}") from None
            tasks = [t for t in tasks if t.level in wanted]
            if candidates is not None:
                candidates = [c for c in candidates if (c.task.level if c.task else c.level) in wanted]
        collectors: list[pytest.Collector] = []
        if errors:
            collectors.append(LoadErrorCollector.from_parent(session, name="cudal1-load-errors",
                                                             nodeid="cudal1-load-errors", errors=errors))
        if optimize:
            from pytest_cudal1.optimize import task_collectors

            return collectors + task_collectors(session, tasks, self.cache_dir)
        pairs, self.unmatched = pair(tasks, candidates)
        by_task: dict[str, list[Any]] = {}
        for task, cand in pairs:
            by_task.setdefault(task.id, []).append((task, cand))
        for task_id, task_pairs in builds_last(list(by_task.items())):
            collectors.append(TaskCollector.from_parent(session, name=task_id, nodeid=task_id, pairs=task_pairs))
        return collectors

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Start compiling every selected candidate now, in parallel, while earlier items judge, and the first
        item's workers."""
        items = [i for i in session.items if isinstance(i, JudgedItem)]
        if items and not self.config.option.collectonly:
            if setting(self.config, "ray"):
                from pytest_cudal1.ray_judge import RayJudge

                self.remote = RayJudge(setting(self.config, "ray"), self.judge_config(), self._say)
                self.remote.submit([(i.nodeid, i.task, i.candidate) for i in items])
                return
            judge = self.judge()
            for item in items:
                if judge.unavailable(item.candidate) is None:
                    judge.builds.submit(item.candidate, judge.gpu, item.task)
            if not hasattr(self.config, "workerinput"):  # an xdist worker learns its items only as they run
                for i, item in enumerate(items):
                    item.next_judged = items[i + 1:i + 1 + judge.spares.depth]
                judge.prefetch([(i.task, i.candidate) for i in items[:judge.spares.depth]])  # start while pytest sets up
            self.progress.started(len(items))

    def _say(self, text: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and self.config.get_verbosity() >= 0:
            reporter.write_line(f"cudal1: {text}")

    def judge_config(self) -> Any:
        """The settings every judge of this run shares (here, or in each Ray actor)."""
        from pytest_cudal1.judge import JudgeConfig
        from pytest_cudal1.timing import TimingConfig

        return JudgeConfig(
            seed=self.seed, workdir=self.cache_dir, judge_seed=setting(self.config, "judge-seed"),
            trials=setting(self.config, "trials"),
            call_timeout=setting(self.config, "call-timeout"),
            compile_timeout=setting(self.config, "compile-timeout"),
            timing=TimingConfig(
                budget_s=setting(self.config, "time-budget"), min_pairs=setting(self.config, "min-pairs"),
                max_pairs=setting(self.config, "max-pairs"), target_rel_ci=setting(self.config, "target-ci"),
                call_timeout=setting(self.config, "call-timeout"),
                graphs=not setting(self.config, "eager-short"), short_ms=setting(self.config, "sample-ms"),
                call_sample_ms=setting(self.config, "call-sample-ms"),
            ),
            custom_kernels_only=self.custom_kernels_only,
            list_kernels=not setting(self.config, "no-kernel-list"),
            peak_bandwidth_gbs=setting(self.config, "peak-bandwidth"),
            remeasure_above=setting(self.config, "remeasure-above"),
            timing_processes=max(1, setting(self.config, "timing-processes")),
            allow_global=self.allow_global,
            speedup=speedup_measure(self.config),
            call_measure=not setting(self.config, "no-call-measure"),
            fresh_trials=setting(self.config, "fresh-trials"),
            lookahead=setting(self.config, "lookahead"),
        )

    def judge(self) -> Any:
        if self._judge is None:
            from pytest_cudal1 import environment
            from pytest_cudal1.builds import BuildPool, build_workers
            from pytest_cudal1.judge import Judge
            from pytest_cudal1.scheduling import worker_count

            gpu = environment.has_gpu()
            cfg = self.judge_config()
            arch = environment.gpu_facts().get("compute_capability")
            builds = BuildPool(self.cache_dir, cfg.compile_timeout, arch, build_workers(worker_count(self.config)))
            from pytest_cudal1.progress import Progress

            self.progress = Progress(self.config, builds, cfg.timing.budget_s)
            self._judge = Judge(cfg, builds, gpu, self.progress)
        return self._judge

    # ------------------------------------------------------------ results ---

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """Under xdist, tell a judged item which item runs next here, so its worker can start early: only that
        one is known (the scheduler hands out the rest later; without xdist, collection told each item its next
        ones)."""
        if isinstance(item, JudgedItem) and hasattr(self.config, "workerinput"):
            item.next_judged = [nextitem] if isinstance(nextitem, JudgedItem) else []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == "cudal1" and report.when == "call":
                self.records.append(value)
                from pytest_cudal1.benchmark_bridge import add_record

                # An optimizer item judges many candidates: one benchmark group each.
                group = report.nodeid if value.get("origin") is None else f"{value['task_id']}::{value['candidate_name']}"
                add_record(self.config, group, value)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self._judge is not None:
            self._judge.close()
        if self.remote is not None:
            self.remote.close()
        from pytest_cudal1.benchmark_bridge import judge_only_candidates

        judge_only_candidates(self.config)  # pytest-benchmark compared every row in its own sessionfinish
        html = setting(self.config, "html")
        if html and self.records and not hasattr(self.config, "workerinput"):  # the controller writes it, once
            from pytest_cudal1.report import build_report

            path = Path(html)
            optimizer = self.config.pluginmanager.get_plugin("cudal1-optimizer")  # its exemplar database, if any
            self.html_path = build_report(self.records, path if path.is_absolute() else
                                          Path(self.config.invocation_params.dir) / path,
                                          db_path=getattr(optimizer, "db_path", None))

    def pytest_report_header(self, config: pytest.Config) -> str:
        return f"cudal1: seed {self.seed}, ledger {self.ledger_path}"

    @pytest.hookimpl(trylast=True)  # the verdicts come last, after any benchmark tables
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.unmatched:
            terminalreporter.write_line(
                f"cudal1: {len(self.unmatched)} candidate(s) name a problem not in {self.searched}, not judged: "
                + ", ".join(f"{c.name} (L{c.level}/{c.problem_id})" for c in self.unmatched[:10])
                + "; pass their tasks with --cudal1-tasks=PATH (a KernelBench checkout, a levelN/ folder or JSONL)",
                yellow=True)
        if self.records:
            from pytest_cudal1.summary import summary_lines

            terminalreporter.section("cudal1 verdicts")
            for line in summary_lines(self.records):
                terminalreporter.write_line(line)
            for event in self.remote.events if self.remote is not None else []:
                terminalreporter.write_line(f"cudal1-ray: {event}", yellow=True)
            terminalreporter.write_line(f"ledger: {self.ledger_path}")
            if self.html_path is not None:
                terminalreporter.write_line(f"report: {self.html_path}")
