"""The trainer learns from the real judge, on the CPU: a tiny model in a menu of real ReLU programs.

Each completion of a 64-wide 2-layer Llama (built here, word-level tokenizer)
names one of four real candidate programs for the bundled task L1/1_ReLU: the
reference rewritten, ``clamp_min``, a row-by-row loop (correct, ~25x slower) and
an in-place cheat (faster, but its output aliases its input: the judge rejects
it). The named program is what the judge builds and runs; the reward is the
judge's verdict and speedup, shaped, nothing else.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from kernelbench.loaders import BUNDLED_TASKS, load_tasks  # noqa: E402
from policy.train_config import TrainConfig, from_dict  # noqa: E402
from pytest_cudal1 import ledger  # noqa: E402
from tiny_model import build_tiny_model  # noqa: E402

RELU = next(t for t in load_tasks(BUNDLED_TASKS)[0] if t.id == "L1/1_ReLU")
_HEAD = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
PROGRAMS = {
    "reference": _HEAD + "        return torch.relu(x)\n",
    "clamp": _HEAD + "        return x.clamp_min(0)\n",
    "slow": _HEAD + "        return torch.stack([row.clamp_min(0) for row in x])\n",
    "cheat": _HEAD + "        return x.relu_()\n",
}
PROMPT = "write relu"
WORDS = ["write", "relu", *PROGRAMS, "um", "so"]


def menu_config(tmp: Path, model: Path, **rl: object) -> TrainConfig:
    """RL only, on the menu, with the judge's short CPU settings and the issue's GRPO numbers (``rl`` overrides)."""
    (tmp / "programs").mkdir(exist_ok=True)
    programs = {}
    for name, code in PROGRAMS.items():
        programs[name] = str(tmp / "programs" / f"{name}.py")
        Path(programs[name]).write_text(code)
    settings: dict[str, object] = dict(num_generations=4, per_device_train_batch_size=8, max_completion_length=8,
                                       learning_rate=5e-3, max_steps=30, save_steps=1000)
    settings.update(rl)
    return from_dict(TrainConfig, {
        "model": str(model), "task_ids": [RELU.id], "ledger": str(tmp / "ledger.jsonl"),
        "db": str(tmp / "db.sqlite"), "workdir": str(tmp / "work"), "output_dir": str(tmp / "out"),
        "use_cpu": True, "bf16": False,
        "judge": {"trials": 2, "time_budget_s": 0.5, "min_pairs": 5, "max_pairs": 20},
        "environment": {"kind": "menu", "prompt": PROMPT, "programs": programs},
        "sft": {"enabled": False}, "rl": settings,
    })


def parameters(model: object) -> dict[str, object]:
    return {k: v.detach().clone() for k, v in model.named_parameters()}  # type: ignore[attr-defined]


def steps(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_grpo_learns_from_the_judge_to_pick_fast_honest_programs_and_avoid_the_cheat(tmp_path: Path) -> None:
    from policy.trainer import run_training
    from transformers import AutoModelForCausalLM

    model_dir = build_tiny_model(tmp_path / "model", words=WORDS, tied=False, chat=False)
    config = menu_config(tmp_path, model_dir)
    start = time.monotonic()
    result = run_training(config)
    elapsed = time.monotonic() - start
    log = steps(result.metrics_log)
    assert len(log) == 30 and result.stages_run == ["rl"]
    first, last = log[:8], log[-8:]
    mean = lambda entries: sum(e["reward_mean"] for e in entries) / len(entries)  # noqa: E731
    cheats = lambda entries: sum(e["cheats"].get("OUTPUT_ALIASES_INPUT", 0) for e in entries)  # noqa: E731
    print(f"30 steps in {elapsed:.0f} s; reward {mean(first):+.2f} -> {mean(last):+.2f}, "
          f"cheats {cheats(first)} -> {cheats(last)}")
    assert mean(last) > mean(first) + 0.2  # seen here: +0.34 to +0.62 (rewards span -1.5 to +1.5)
    # The cheat's share of the answers that name a program, on 512 answers sampled from each model: the
    # training's own picks are too few for it (CI once saw 4 in the first 8 steps and 3 in the last).
    initial = AutoModelForCausalLM.from_pretrained(model_dir)
    before_share, after_share = cheat_share(initial, model_dir), cheat_share(result.model, model_dir)
    print(f"cheat share of named programs {before_share:.3f} -> {after_share:.3f}")
    assert before_share > 0.05 and after_share < before_share / 2
    # The parameters moved away from the saved random initialisation.
    before = parameters(initial)
    after = parameters(result.model)
    assert any(not before[k].equal(after[k]) for k in before)
    # Every reward came from a judged record: each program was judged once, for real, and reused afterwards;
    # the cheat was rejected by the judge's aliasing check and earned the floor every time.
    judged = {r.candidate_sha256: r for r in ledger.read(config.ledger) if r.verdict.reason.value != "NO_CODE"}
    by_code = {hashlib_sha(code): name for name, code in PROGRAMS.items()}
    verdicts = {by_code[sha]: r.verdict.reason.value for sha, r in judged.items()}
    assert verdicts["cheat"] == "OUTPUT_ALIASES_INPUT" and verdicts["reference"] == "OK" and verdicts["slow"] == "OK"
    items = [i for e in log for i in e["items"]]
    assert all(i["reward"] == -1.5 for i in items if i["reason"] != "OK")
    assert all(i["judge_reward"] == judged[i["candidate_sha256"]].reward for i in items if i["reason"] != "NO_CODE")
    assert sum(not i["reused"] for i in items if i["reason"] != "NO_CODE") == len(judged)
    # The run's report shows the ledger and the training curves: one reward point per logged step.
    assert result.report == tmp_path / "out" / "report.html"
    page = result.report.read_text(encoding="utf-8")
    assert 'id="training"' in page and all(f'data-candidate="{r.candidate_name}"' in page for r in judged.values())
    reward_chart = page.split('class="chart" data-chart="reward"', 1)[1].split("</svg>", 1)[0]
    assert reward_chart.count("<circle") == 30


def cheat_share(model: object, model_dir: Path, n: int = 512) -> float:
    """Of ``n`` answers sampled as in training (8 tokens, temperature 1), the share naming ``cheat`` first among
    those that name a program at all."""
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompt = tokenizer(PROMPT, return_tensors="pt")
    torch.manual_seed(0)
    with torch.no_grad():
        out = model.generate(**prompt, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=8,  # type: ignore[attr-defined]
                             num_return_sequences=n, pad_token_id=tokenizer.pad_token_id)
    firsts = []
    for text in tokenizer.batch_decode(out[:, prompt["input_ids"].shape[1]:], skip_special_tokens=True):
        named = [w for w in text.split() if w in PROGRAMS]
        if named:
            firsts.append(named[0])
    return firsts.count("cheat") / max(len(firsts), 1)


def hashlib_sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def test_lora_rloo_trains_and_saves_the_adapter_then_resumes_from_its_checkpoint_after_sft(tmp_path: Path) -> None:
    import dataclasses

    from policy.train_config import LoraSettings, SFTSettings
    from policy.trainer import run_training

    model_dir = build_tiny_model(tmp_path / "model", words=WORDS, tied=False, chat=False)
    config = dataclasses.replace(menu_config(tmp_path, model_dir, algorithm="rloo", max_steps=2, save_steps=2),
                                 lora=LoraSettings(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    first = run_training(config)
    lora_b = {k: v for k, v in parameters(first.model).items() if "lora_B" in k}
    assert lora_b and any(v.abs().sum() > 0 for v in lora_b.values())  # LoRA's B starts at zero: it trained
    final = tmp_path / "out" / "rl" / "final"
    assert (final / "adapter_model.safetensors").exists() and (final / "adapter_config.json").exists()
    assert (tmp_path / "out" / "rl" / "checkpoint-2").is_dir()

    # Resume as after a crash in RL: SFT (now enabled) runs on the database's successes, RL goes on from step 2.
    (tmp_path / "out" / "rl" / "DONE").unlink()
    resumed = dataclasses.replace(config, resume=True, sft=SFTSettings(learning_rate=1e-3),
                                  rl=dataclasses.replace(config.rl, max_steps=3))
    second = run_training(resumed)
    assert second.stages_run == ["sft", "rl"]
    assert (tmp_path / "out" / "sft" / "final" / "adapter_model.safetensors").exists()
    log = steps(second.metrics_log)
    assert [(e["stage"], e["step"]) for e in log] == [("rl", 0), ("rl", 1), ("rl", 2)]


def test_self_supervised_round_samples_judges_and_fine_tunes_on_the_successes(tmp_path: Path) -> None:
    import dataclasses

    from policy.train_config import RLSettings, SelfSupervisedSettings
    from policy.trainer import run_training

    model_dir = build_tiny_model(tmp_path / "model", words=WORDS, tied=False, chat=False)
    base = menu_config(tmp_path, model_dir)
    config = dataclasses.replace(base, rl=RLSettings(enabled=False), self_supervised=SelfSupervisedSettings(
        rounds=1, prompts_per_round=2, samples=4, max_new_tokens=6, learning_rate=1e-3))
    result = run_training(config)
    assert result.stages_run == ["self_supervised"]
    (entry,) = steps(result.metrics_log)
    assert entry["stage"] == "self_supervised" and entry["completions"] == 8
    origins = [r.origin for r in ledger.read(config.ledger)]
    assert origins and all(o["stage"] == "self_supervised" and o["policy"] == "train" for o in origins)
    trained = (tmp_path / "out" / "self_supervised" / "round-0").is_dir()
    assert trained == (entry["success_rate"] > 0)  # fine-tuned exactly when the judge passed something
