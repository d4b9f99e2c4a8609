"""`cudal1-train` on a GPU with rewards from the real judge: a tiny model in a menu of real programs.

A model built in code (2 layers, 64 wide, random weights) cannot write a kernel, so each
completion names one of the programs in ``benchmarks/candidates/train_menu_L2_12/`` for
KernelBench L2/12 (Gemm, multiply, LeakyReLU): the task's own computation, a fused rewrite,
a float64 one (correct, slow), and two cheats the judge rejects (bfloat16 GEMM, TF32 switched
on process-wide). The named program is what the judge builds, checks and times on the GPU;
the reward is its verdict and speedup, shaped — nothing else. Writes the config, the metrics
log, the ledger and the HTML report under ``--out``.

    python3 benchmarks/train_smoke.py --tasks .device/kb_rewrites.jsonl --out OUT [--steps 30]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "benchmarks" / "candidates" / "train_menu_L2_12"
TASK_ID = "L2/12_Gemm_Multiply_LeakyReLU"
PROMPT = "write kernel"


def tiny_model(folder: Path, words: list[str]) -> Path:
    """The tests' tiny model builder (``tests/policy/tiny_model.py``), loaded by path."""
    spec = importlib.util.spec_from_file_location("tiny_model", ROOT / "tests" / "policy" / "tiny_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_tiny_model(folder, words=words, tied=False, chat=False)


def config(out: Path, tasks: Path, steps: int, budget: float, use_cpu: bool) -> dict:
    programs = {p.stem: str(p) for p in sorted(PROGRAMS.glob("*.py"))}
    model = tiny_model(out / "model", ["write", "kernel", *programs, "um", "so"])
    return {
        "model": str(model), "tasks": str(tasks.resolve()), "task_ids": [TASK_ID],
        "ledger": str(out / "ledger.jsonl"), "db": str(out / "db.sqlite"), "workdir": str(out / "work"),
        "output_dir": str(out / "train"), "report": str(out / "report.html"), "use_cpu": use_cpu, "bf16": False,
        "judge": {"time_budget_s": budget},
        "environment": {"kind": "menu", "prompt": PROMPT, "programs": programs},
        "sft": {"enabled": False},
        "rl": {"num_generations": 4, "per_device_train_batch_size": 8, "max_completion_length": 8,
               "learning_rate": 5e-3, "max_steps": steps, "save_steps": 1000},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=Path, required=True, help="tasks holding L2/12 (KernelBench JSONL)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--time-budget", type=float, default=2.0, help="the judge's timing budget per measure (s)")
    parser.add_argument("--cpu", action="store_true", help="train and judge on the CPU (a smoke test of the script)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "train.json"
    path.write_text(json.dumps(config(args.out, args.tasks, args.steps, args.time_budget, args.cpu), indent=2))
    command = [shutil.which("cudal1-train") or "", str(path)]
    if not command[0]:
        command = [sys.executable, "-m", "policy.train_cli", str(path)]
    return subprocess.call(command, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
