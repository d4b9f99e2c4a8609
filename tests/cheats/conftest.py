"""Red-team suite plumbing: start every needed judged run at once, hand each test its run's result.

Tests declare their run with ``pytest.mark.judge_group(Group)``. After
collection the selected items name the groups they need; the ``judged``
fixture starts all of them on a thread pool the first time any test asks (so
``-k one_case`` runs one group only) and blocks on the one asked for. GPU
groups are never started without CUDA. At the end, the terminal summary lists
every planted candidate with its expected and actual verdict.
"""

from __future__ import annotations

import concurrent.futures
import os
from typing import Any

import pytest

from .cheatkit import Group, GroupResult, run_group_shared, verdict_of


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "judge_group(group): the judged pytest run (a cheatkit.Group) a test reads")
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped without one")


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


class Runs:
    """Starts the groups the selected tests need; ``get`` waits for one."""

    def __init__(self, groups: dict[str, Group], tmp_factory: pytest.TempPathFactory) -> None:
        self.groups = groups
        self.tmp_factory = tmp_factory
        self.futures: dict[str, concurrent.futures.Future[GroupResult]] = {}
        jobs = int(os.environ.get("CUDAL1_CHEATS_JOBS") or min(os.cpu_count() or 1, 4))
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs))
        self.cuda = None

    def start_all(self) -> None:
        # Longest first: the release run judges the most candidates.
        order = sorted(self.groups.values(), key=lambda g: (g.release is None, -len(g.candidates)))
        for g in order:
            self._submit(g)

    def _submit(self, group: Group) -> None:
        if group.name in self.futures:
            return
        if group.needs_gpu:
            if self.cuda is None:
                self.cuda = _cuda()
            if not self.cuda:
                return
        base = self.tmp_factory.getbasetemp()
        root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # xdist workers share the parent
        self.futures[group.name] = self.pool.submit(run_group_shared, group, root)

    def get(self, group: Group) -> GroupResult:
        self.groups.setdefault(group.name, group)
        self._submit(group)
        if group.name not in self.futures:
            pytest.skip(f"group {group.name} needs a CUDA GPU")
        return self.futures[group.name].result()

    def done(self) -> list[GroupResult]:
        out = []
        for f in self.futures.values():
            if f.done() and f.exception() is None:
                out.append(f.result())
        return out


_RUNS: list[Runs] = []
_EXPECTED: dict[tuple[str, str], Any] = {}


@pytest.fixture(scope="session")
def judged(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    groups: dict[str, Group] = {}
    for item in request.session.items:
        for mark in item.iter_markers("judge_group"):
            g = mark.args[0]
            groups.setdefault(g.name, g)
        c = getattr(item, "callspec", None)
        case = c.params.get("case") if c is not None else None
        if case is not None and hasattr(case, "expect") and hasattr(case, "group"):
            _EXPECTED[(case.group, case.name)] = case.expect
    runs = Runs(groups, tmp_path_factory)
    runs.start_all()
    _RUNS.append(runs)
    yield runs
    runs.pool.shutdown(wait=True)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _RUNS:
        return
    results = _RUNS[0].done()
    if not results:
        return
    terminalreporter.section("cudal1 red-team verdicts (candidate -> expected -> actual)")
    for res in sorted(results, key=lambda r: r.group.name):
        terminalreporter.write_line(f"[{res.group.name}] {len(res.records)} records in {res.seconds:.1f} s "
                                    f"(exit {res.returncode}; {res.workdir})")
        for rec in res.records:
            name = rec.get("candidate_name")
            expect = _EXPECTED.get((res.group.name, name))
            actual, message = verdict_of(rec)
            want = "/".join(sorted(expect)) if expect else "?"
            flag = "  " if expect and actual in expect else "!!"
            terminalreporter.write_line(f"  {flag} {name:<34} {want:<34} {actual:<22} {message[:70]}")
