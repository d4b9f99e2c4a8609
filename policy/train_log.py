"""Training metrics per step: one JSON line each (the full record), a console line, TensorBoard when installed.

The JSONL log is also what a resumed run reads back: its per-completion judge
rewards refill the reward normaliser's window, so shaping continues where it
stopped instead of restarting from an empty window.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Iterator, TextIO

from policy.judge_reward import flat_metrics


class MetricsLog:
    """Appends each step's metrics to ``path``; ``write`` is the reward function's ``on_step``."""

    def __init__(self, path: Path, console: TextIO | None = sys.stderr, tensorboard: bool | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.console = console
        use_tb = importlib.util.find_spec("tensorboard") is not None if tensorboard is None else tensorboard
        self.tb = None
        if use_tb:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(self.path.parent / "tensorboard"))
        self.index = sum(1 for _ in read(self.path))  # a running count across stages and resumes

    def write(self, metrics: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(metrics, sort_keys=True) + "\n")
        if self.console is not None:
            cheats = ", ".join(f"{k} {n}" for k, n in metrics["cheats"].items()) or "none"
            best = ", ".join(f"{k} {v:.2f}x" for k, v in metrics["best_speedup"].items()) or "-"
            print(f"[cudal1-train] {metrics['stage']} step {metrics['step']}: reward {metrics['reward_mean']:+.3f} "
                  f"± {metrics['reward_std']:.3f}, success {metrics['success_rate']:.0%}, cheats {cheats}, "
                  f"judged {metrics['judged']} ({metrics['judge_s_per_completion']:.1f} s each), "
                  f"reused {metrics['reused']}; best {best}", file=self.console, flush=True)
        if self.tb is not None:
            scalars = {**flat_metrics(metrics), "reward/mean": metrics["reward_mean"],
                       "reward/std": metrics["reward_std"]}
            for name, value in scalars.items():
                self.tb.add_scalar(f"{metrics['stage']}/{name}", value, self.index)
            self.tb.flush()
        self.index += 1


def read(path: Path) -> Iterator[dict[str, Any]]:
    """The log's entries in order (none when the file does not exist yet); a torn final line (a run killed
    mid-write) or a foreign line is skipped, as the ledger's reader does."""
    if not Path(path).exists():
        return
    with Path(path).open(encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                return
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                yield entry
