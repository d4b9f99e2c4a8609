"""The test items of a judging run: one per (task, candidate) pair, and one per file that failed to load."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_cudal1.reasons import Reason

if TYPE_CHECKING:
    from pytest_cudal1.plugin import CudaL1Session


class TaskCollector(pytest.Collector):
    """One task's candidates, so item ids read ``L1/19_ReLU::cand``."""

    def __init__(self, *, pairs: list[Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pairs = pairs

    def collect(self) -> list[pytest.Item]:
        items, seen = [], set()
        for task, cand in self.pairs:
            name, n = cand.name, 2
            while name in seen:  # JSONL releases may repeat a name
                name, n = f"{cand.name}#{n}", n + 1
            seen.add(name)
            items.append(JudgedItem.from_parent(self, name=name, task=task, candidate=cand))
        return items


class LoadErrorCollector(pytest.Collector):
    """Tasks and candidates that could not be loaded: one failing item each."""

    def __init__(self, *, errors: list[Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.errors = errors

    def collect(self) -> list[pytest.Item]:
        return [LoadErrorItem.from_parent(self, name=e.origin, error=e) for e in self.errors]


class CandidateRejected(Exception):
    """The judged pair failed; the message names task, candidate and reason code."""


class JudgedItem(pytest.Item):
    def __init__(self, *, task: Any, candidate: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task = task
        self.candidate = candidate
        self.next_judged: list[JudgedItem] = []  # the items this process runs next, as far as known (set per run)
        self.add_marker("judged")
        if task.level is not None:
            self.add_marker(f"level{task.level}")
        self.add_marker(f"backend_{candidate.backend}")
        if candidate.backend in ("cuda", "cupy"):
            self.add_marker("gpu")

    def runtest(self) -> None:
        from pytest_cudal1 import ledger

        state: "CudaL1Session" = self.config.pluginmanager.get_plugin("cudal1-session")
        if state.remote is not None:  # judged by a Ray actor; recorded here, once
            record = state.remote.result(self.nodeid)
        else:
            judge = state.judge()
            state.progress.item(self.nodeid, self.candidate)
            record = judge.judge(self.task, self.candidate, [(i.task, i.candidate) for i in self.next_judged])
        self.user_properties.append(("cudal1", record.to_json()))  # skipped ones too: the summary shows them
        if not record.verdict.reason.judged:  # unrunnable here (backend, memory): no ledger line, so no reward
            pytest.skip(f"{self.nodeid}: [{record.verdict.reason.value}] {record.verdict.message}")
        ledger.append(state.ledger_path, record)
        if not record.verdict.passed:
            raise CandidateRejected(f"{record.item_id} [{record.verdict.reason.value}] {record.verdict.message}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, CandidateRejected):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[str, int | None, str]:
        return self.candidate.origin.rsplit(":", 1)[0], None, self.nodeid


class LoadErrorItem(pytest.Item):
    """A task or candidate that could not be loaded fails here, and only here."""

    def __init__(self, *, error: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error
        self.add_marker("judged")

    def runtest(self) -> None:
        code = Reason.BAD_TASK if self.error.kind == "task" else Reason.BAD_CANDIDATE_FILE
        raise CandidateRejected(f"{self.error.origin}: [{code.value}] {self.error.message}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        return str(excinfo.value)

    def reportinfo(self) -> tuple[str, int | None, str]:
        return self.error.origin, None, self.name
