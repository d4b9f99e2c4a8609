"""Progress lines on the terminal while items judge: builds queued/running/done, the item's phase, pairs timed.

A first item can wait minutes for compilers, and CPU timing waits for every
build; without these lines the run looks hung. They follow pytest's
conventions: written through the terminal reporter with capturing suspended
(like live logging), prefixed ``cudal1:``; the long waits at the default
verbosity, every item's timing under ``-v``; silent under ``-q`` and in xdist
workers (whose output nobody sees).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_cudal1.candidates import simulated


class Progress:
    def __init__(self, config: pytest.Config, builds: Any, budget_s: float) -> None:
        self.config = config
        self.builds = builds
        self.budget_s = budget_s
        self.nodeid = ""
        self.reporter = config.pluginmanager.get_plugin("terminalreporter")
        self.quiet = config.get_verbosity() < 0 or hasattr(config, "workerinput") or self.reporter is None

    def line(self, text: str, verbosity: int = 0) -> None:
        """One line, at ``verbosity`` and above (0: the long waits; 1, under ``-v``: every item's timing)."""
        if self.quiet or self.config.get_verbosity() < verbosity:
            return
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        if capman is None:
            self.reporter.write_line(f"cudal1: {text}")
            return
        with capman.global_and_fixture_disabled():
            self.reporter.ensure_newline()
            self.reporter.write_line(f"cudal1: {text}")

    def _builds(self) -> str:
        c = self.builds.counts()
        return f"builds: {c['done']} done, {c['running']} running, {c['queued']} queued"

    def started(self, items: int) -> None:
        """After collection: what will happen, so the first seconds are not silent."""
        total = len(self.builds.futures)
        if total:
            self.line(f"judging {items} item(s); {total} candidate build(s) started on "
                      f"{self.builds.workers} thread(s) ({self._builds()})")
        else:
            self.line(f"judging {items} item(s)")

    def item(self, nodeid: str, candidate: Any) -> None:
        """Before an item judges: say so if it must wait for its own build first."""
        self.nodeid = nodeid
        if self.builds.pending(candidate):
            self.line(f"{nodeid}: waiting for its build ({self._builds()})")

    def __call__(self, phase: str, record: Any, ended: bool) -> None:
        """A judging phase begins or ends (``Judge.on_phase``)."""
        timing_next = "trials" in record.phase_s  # the second build wait: the CPU's, before timing
        if phase == "build_wait" and not ended:
            if self.builds.counts()["done"] < len(self.builds.futures):
                self.line(f"{self.nodeid}: waiting for the other builds before timing "
                          f"(CPU timing never shares cores with compilers; {self._builds()})")
        elif phase == "timing" and not ended:
            self.line(f"{self.nodeid}: timing pairs (up to {self.budget_s:g} s)", verbosity=1)
        elif phase == "build_wait" and not timing_next and record.phase_s[phase] >= 1:
            self.line(f"{self.nodeid}: build ready after {record.phase_s[phase]:.0f} s")
        elif phase == "timing" and record.timing is not None:
            t = record.timing
            speed = "simulated" if simulated(record.backend, record.device) else f"speedup {t.speedup:.2f}x"
            self.line(f"{self.nodeid}: timed {t.pairs} pairs in {record.phase_s[phase]:.1f} s, {speed}", verbosity=1)
