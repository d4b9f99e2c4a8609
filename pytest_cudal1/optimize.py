"""``pytest --cudal1-optimize``: one item per selected task runs the optimizer loop (``policy.optimizer``).

Items are ``L1/1_ReLU::optimize``, marked ``optimize`` and their level, so
``-k``, ``-m`` and pasted ids select tasks as they do judged pairs. Every record
the loop makes goes to the item's ``user_properties`` under ``cudal1``, exactly
like a judged item's, so the verdict table, the HTML report and the benchmark
rows show them (under xdist too); the loop's own per-task numbers travel under
``cudal1-optimizer`` to the final table. An item fails only when nothing could
be judged for its task; a wrong or cheating answer is a ledger line.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_cudal1.options import setting, speedup_measure

PLUGIN = "cudal1-optimizer"


def _path(config: pytest.Config, value: str) -> Path:
    path = Path(value)
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


def _is_ledger(path: Path) -> bool:
    """A file whose first record is a judged one (it has a verdict); a folder or candidate records are not."""
    if path.is_dir():
        return False
    with open(path, encoding="utf-8", errors="replace") as f:
        first = next((line for line in f if line.strip()), "")
    try:
        return "verdict" in json.loads(first)
    except (ValueError, TypeError):
        return True  # not JSON lines at all: the ledger reader says what it could not read


class OptimizerPlugin:
    """Per-process resources of the loop (database, backend, prompts, output folder) and the final table."""

    def __init__(self, config: pytest.Config) -> None:
        from policy.optimizer import OptimizerSettings, OutputDir
        from policy.backends import SamplingSettings

        self.config = config
        self.out = OutputDir(_path(config, setting(config, "out")))
        numbers = {name: setting(config, name) for name in ("rounds", "per-round", "turns", "exemplars")}
        bad = [f"--cudal1-{n}={v}" for n, v in numbers.items() if v < 1]
        if not setting(config, "tau") > 0:
            bad.append(f"--cudal1-tau={setting(config, 'tau')}")
        if bad:
            raise pytest.UsageError(f"{', '.join(bad)}: expected a positive number")
        self.settings = OptimizerSettings(
            policy=setting(config, "policy"), rounds=numbers["rounds"], per_round=numbers["per-round"],
            turns=numbers["turns"], task_budget_s=setting(config, "task-budget") or None,
            exemplars=numbers["exemplars"], tau=setting(config, "tau"), measure=speedup_measure(config),
            sampling=SamplingSettings(temperature=setting(config, "temperature"),
                                      max_tokens=setting(config, "max-tokens")),
            resume=setting(config, "resume"))
        self.tasks: list[dict[str, Any]] = []  # each finished item's TaskProgress, for the final table
        self._db: Any = None
        self.db_path: Path | None = None
        self.trained: str | None = None  # --cudal1-train's outcome, for the final table
        self._backend: Any = None
        self.run_stamp = f"{time.strftime('%Y%m%dT%H%M%S')}-{id(self) % 10**6}"

    def db(self, tasks: list[Any], cache_dir: Path) -> Any:
        """Open (or create) the exemplar database once; a file this version cannot use is a usage error."""
        if self._db is None:
            from policy.exemplars import ExemplarDB, ExemplarDBError

            path = _path(self.config, setting(self.config, "db")) if setting(self.config, "db") else \
                cache_dir / "exemplars.sqlite"
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db_path = path
            try:
                self._db = ExemplarDB(path)
            except ExemplarDBError as exc:
                raise pytest.UsageError(f"--cudal1-db: {exc}") from None
            self._import(tasks, cache_dir)
        return self._db

    def reconcile(self, tasks: list[Any], cache_dir: Path, ledger: Path) -> None:
        """Resume: the ledger line is written before the database row, so a kill between the two left a line
        the database lacks; importing the run's ledger adds it (rows already there are unchanged)."""
        if self.settings.resume and ledger.is_file():
            self._db.import_ledger(ledger, tasks, search=[cache_dir])

    def _import(self, tasks: list[Any], cache_dir: Path) -> None:
        """``--cudal1-import`` ledgers become rows; only this judge's OK on this GPU is ever an exemplar.

        Entries that are not ledgers (a kernel release's JSONL, a candidates folder) are where the ledgers' code
        is looked up: a ledger names its code by hash and origin, and a release judged from a copy that is gone
        (a GPU machine's temporary folder) is found again only in the release itself."""
        paths = []
        for name in filter(None, (p.strip() for p in (setting(self.config, "import") or "").split(","))):
            path = _path(self.config, name)
            if not path.exists():
                raise pytest.UsageError(f"--cudal1-import: {name} does not exist")
            paths.append(path)
        sources = [p for p in paths if not _is_ledger(p)]
        for path in (p for p in paths if p not in sources):
            report = self._db.import_ledger(path, tasks, search=[cache_dir, *sources, path.parent])
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None and not hasattr(self.config, "workerinput"):
                reporter.write_line(f"cudal1: imported {path}: {report.stored} record(s) stored, "
                                    f"{report.no_code} without their code, {report.no_task} without their task")

    def backend(self) -> Any:
        if self._backend is None:
            from policy.backends import make_backend

            self._backend = make_backend(self.settings.policy)
        return self._backend

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._db is not None:
            self._db.close()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.tasks.extend(value for key, value in report.user_properties if key == PLUGIN)

    @pytest.hookimpl(trylast=True)  # registered after the session: printed after its verdict table
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.trained:
            terminalreporter.write_line(self.trained)
        if not self.tasks:
            return
        from policy.optimizer import rejected_text, speed, speedups_text

        terminalreporter.section("cudal1 optimizer")
        header = ("task", "rounds", "tried", "OK", "rejected", "best", "best speedup", "tokens (in/out)", "stopped")
        rows = [header] + [(
            t["task_id"], str(t["rounds_done"]), str(t["tried"]), str(t["ok"]), rejected_text(t["rejected"]),
            t["best"]["candidate_name"] if t["best"] else "-", speedups_text(t["best"]),
            f"{t['tokens']['prompt']}/{t['tokens']['completion']}", t["stopped"]) for t in sorted(
                self.tasks, key=lambda t: t["task_id"])]
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        for row in rows:
            terminalreporter.write_line("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        measure = self.settings.measure
        faster = sum(1 for t in self.tasks if t["best"] and (speed(t["best"], measure) or 0) > 1.01)
        terminalreporter.write_line(f"optimized: {faster} of {len(self.tasks)} task(s) above 1.01x ({measure}); "
                                    f"best candidates in {self.out.root}")


def task_collectors(session: pytest.Session, tasks: list[Any], cache_dir: Path) -> list[pytest.Collector]:
    """One collector per task holding its ``optimize`` item; opens the database first (usage errors early)."""
    plugin: OptimizerPlugin = session.config.pluginmanager.get_plugin(PLUGIN)
    plugin.db(tasks, cache_dir)
    plugin.reconcile(tasks, cache_dir, session.config.pluginmanager.get_plugin("cudal1-session").ledger_path)
    try:
        plugin.backend()
    except ValueError as exc:
        raise pytest.UsageError(f"--cudal1-policy: {exc}") from None
    collectors: list[pytest.Collector] = [OptimizeCollector.from_parent(session, name=t.id, nodeid=t.id, task=t)
                                          for t in tasks]
    if setting(session.config, "train"):
        collectors.append(TrainCollector.from_parent(session, name="cudal1-train", nodeid="cudal1-train",
                                                     train=train_config(session.config), tasks=tasks))
    return collectors


def train_config(config: pytest.Config) -> Any:
    """``--cudal1-train``'s file, read now: a bad config is a usage error before any task is optimized."""
    from policy.train_config import ConfigError, TrainConfig

    if getattr(config.option, "numprocesses", None):
        raise pytest.UsageError("--cudal1-train trains after the optimizer's items in one process: drop -n")
    try:
        return TrainConfig.from_file(_path(config, setting(config, "train")))
    except ConfigError as exc:
        raise pytest.UsageError(f"--cudal1-train: {exc}") from None


class TrainCollector(pytest.Collector):
    """Collected after every task's collector, so training starts once the optimizer's items are done."""

    def __init__(self, *, train: Any, tasks: list[Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.train = train
        self.tasks = tasks

    def collect(self) -> list[pytest.Item]:
        return [TrainItem.from_parent(self, name="train", train=self.train, tasks=self.tasks)]


class TrainItem(pytest.Item):
    """``cudal1-train::train``: ``policy.trainer.run_training`` on the optimizer's ledger and database.

    The config's own ledger and database are replaced by the run's, so the trainer starts from every
    exemplar the optimizer stored and its judged completions land beside them; without ``task_ids`` it
    trains on the tasks this run optimized. ``-k`` that selects any of those tasks keeps this item.
    """

    def __init__(self, *, train: Any, tasks: list[Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.train = train
        self.tasks = tasks
        self.add_marker("optimize")
        self.extra_keyword_matches.update(t.id for t in tasks)
        self.extra_keyword_matches.update(t.name for t in tasks)

    def runtest(self) -> None:
        import dataclasses

        from policy.trainer import run_training

        state = self.config.pluginmanager.get_plugin("cudal1-session")
        opt: OptimizerPlugin = self.config.pluginmanager.get_plugin(PLUGIN)
        selected = [i.task.id for i in self.session.items if isinstance(i, OptimizeItem)]
        tasks = setting(self.config, "tasks")
        config = dataclasses.replace(
            self.train, ledger=str(state.ledger_path), db=str(opt.db_path),
            tasks=self.train.tasks or (str(_path(self.config, tasks)) if tasks else None),
            task_ids=self.train.task_ids or selected)
        result = run_training(config, console=_ProgressConsole(state.progress))
        opt.trained = (f"cudal1-train: stages run {', '.join(result.stages_run) or 'none'}; model in "
                       f"{config.output_dir}" + (f"; report {result.report}" if result.report else ""))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return "cudal1-train", None, self.nodeid


class OptimizeCollector(pytest.Collector):
    """One task, so the item's id reads ``L1/1_ReLU::optimize`` and ``-k L1`` matches it."""

    def __init__(self, *, task: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task = task

    def collect(self) -> list[pytest.Item]:
        return [OptimizeItem.from_parent(self, name="optimize", task=self.task)]


class NothingJudged(Exception):
    """The loop made no judgment for the task; the message names task, backend and reason."""


class OptimizeItem(pytest.Item):
    def __init__(self, *, task: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task = task
        self.add_marker("optimize")
        if task.level is not None:
            self.add_marker(f"level{task.level}")

    def runtest(self) -> None:
        from policy.exemplars import gpu_of
        from policy.judging import JudgingSession
        from policy.optimizer import TaskOptimizer
        from policy.prompts import PromptBuilder
        from pytest_cudal1 import environment

        state = self.config.pluginmanager.get_plugin("cudal1-session")
        opt: OptimizerPlugin = self.config.pluginmanager.get_plugin(PLUGIN)
        judge = state.judge()
        facts = environment.describe()
        gpu = gpu_of({"environment": facts, "device": "cuda" if judge.gpu else "cpu"})
        items = [i for i in self.session.items if isinstance(i, OptimizeItem)]
        at = items.index(self)
        following = items[at + 1].task if at + 1 < len(items) else None
        session = JudgingSession(
            judge, state.ledger_path, opt.db([], state.cache_dir),
            state.cache_dir / "optimizer" / opt.run_stamp, on_record=self._keep,
            on_judging=state.progress.item, next_task=following)
        backend = opt.backend()
        optimizer = TaskOptimizer(self.task, backend, session, opt.db([], state.cache_dir), PromptBuilder(),
                                  opt.out, opt.settings, gpu, facts.get("gpu") or "the CPU",
                                  on_round=lambda p, rnd: state.progress.line(round_line(self.nodeid, p, rnd,
                                                                                         opt.settings.rounds)))
        progress = optimizer.run()
        self.user_properties.append((PLUGIN, progress.to_json()))
        if progress.tried or progress.duplicates or not optimizer.rounds_run:
            return
        if progress.skipped:
            pytest.skip(f"{self.nodeid}: this machine could not judge any of its {progress.skipped} candidate(s)")
        why = progress.last_failure or "the task budget ran out before the first judgment"
        raise NothingJudged(f"{self.nodeid} [policy {opt.settings.policy}]: nothing could be judged: {why}")

    def _keep(self, record: Any) -> None:
        self.user_properties.append(("cudal1", record.to_json()))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, NothingJudged):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[str, int | None, str]:
        return self.task.origin, None, self.nodeid


class _ProgressConsole:
    """The trainer's console lines through the session's progress (shown while pytest captures output)."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress
        self.pending = ""

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in filter(None, lines):
            self.progress.line(line)
        return len(text)

    def flush(self) -> None:
        pass


def round_line(nodeid: str, p: Any, rnd: int, rounds: int) -> str:
    """``L1/1_ReLU::optimize: round 1/2: tried 4, OK 3, rejected WRONG_OUTPUT 1; best r1_c2 (kernel 1.20x, ...)``."""
    from policy.optimizer import rejected_text, speedups_text

    best = f"best {p.best['candidate_name']} ({speedups_text(p.best)})" if p.best else "no correct candidate yet"
    failed = f", generation failed {p.generation_failures}" if p.generation_failures else ""
    failed += f", no further rewrite {p.exhausted}" if p.exhausted else ""
    return (f"{nodeid}: round {rnd}/{rounds}: tried {p.tried}, OK {p.ok}, rejected {rejected_text(p.rejected)}"
            f"{failed}; {best}; tokens {p.tokens['prompt']} in, {p.tokens['completion']} out")
