"""``benchmarks/forged_timer.py`` runs as a script on the CPU: a relu judged against itself and against a timer forged
past a disarmed tamper watch, with both verdicts and the allowance in its JSON and table."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_forged_timer_benchmark_names_the_forger_and_passes_the_honest_relu(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "forged_timer.py"), "--out", str(tmp_path),
                           "--shapes", "4096, 4096", "--divisors", "100", "--repeats", "1"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {r["candidate"]: r for r in json.loads((tmp_path / "forged-timer.json").read_text())}
    assert rows["honest"]["verdict"] == "OK", rows["honest"]
    # Each order's median ratio, from the record's pairs (NaN for an order no pair had: it is drawn per pair).
    by_order = [rows["honest"]["ratio_candidate_first"], rows["honest"]["ratio_reference_first"]]
    assert not all(math.isnan(x) for x in by_order) and all(math.isnan(x) or 0.5 < x < 2 for x in by_order)
    assert rows["forged_100"]["verdict"] == "TIMER_MISMATCH", rows["forged_100"]
    assert rows["forged_100"]["evidence"]["unreported_ms"] > rows["forged_100"]["evidence"]["allowed_ms"]
    table = (tmp_path / "forged-timer.md").read_text()
    assert "| L1/1_relu_4096x4096 | forged_100 | 0 | TIMER_MISMATCH |" in table and "honest self-judged" in table
