"""TrainConfig files: TOML and JSON load into the dataclasses; typos and bad combinations are refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policy.train_config import ConfigError, TrainConfig


def test_toml_loads_nested_sections_with_paths_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "cfg").mkdir()
    path = tmp_path / "cfg" / "run.toml"
    path.write_text('model = "Qwen/Qwen2.5-0.5B"\nledger = "runs/ledger.jsonl"\ntask_ids = ["L1/1_ReLU"]\n'
                    '[rl]\nalgorithm = "rloo"\nbeta = 0.02\nnum_generations = 4\nper_device_train_batch_size = 8\n'
                    '[rl.reward]\nclip = 2.0\n[lora]\nr = 8\n[judge]\ntrials = 3\n')
    config = TrainConfig.from_file(path)
    assert config.model == "Qwen/Qwen2.5-0.5B"  # not a local path: kept as a hub id
    assert config.ledger == str(tmp_path / "cfg" / "runs" / "ledger.jsonl")
    assert (config.rl.algorithm, config.rl.beta, config.rl.reward.clip, config.rl.reward.window) == \
        ("rloo", 0.02, 2.0, 1000)
    assert config.lora is not None and config.lora.r == 8 and config.lora.target_modules == "all-linear"
    assert config.judge.trials == 3 and config.rl.loss_type is None  # None: TRL's own default


def test_json_loads_the_same_way_and_lora_stays_off_by_default(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"model": "m", "rl": {"loss_type": "dr_grpo", "max_steps": 7}}))
    config = TrainConfig.from_file(path)
    assert (config.rl.loss_type, config.rl.max_steps, config.lora) == ("dr_grpo", 7, None)


@pytest.mark.parametrize("text, message", [
    ('model = "m"\n[rl]\nlerning_rate = 1e-5\n', "unknown key(s) rl.lerning_rate"),
    ('model = "m"\nstages = 3\n', "unknown key(s) stages"),
    ('[rl]\nmax_steps = 3\n', "model"),
    ('model = "m"\n[rl]\nalgorithm = "ppo"\n', "rl.algorithm must be one of"),
    ('model = "m"\n[rl]\nalgorithm = "rloo"\nloss_type = "dapo"\n', "loss_type is a GRPO option"),
    ('model = "m"\n[rl]\nnum_generations = 3\nper_device_train_batch_size = 8\n', "multiple of rl.num_generations"),
    ('model = "m"\n[environment]\nkind = "menu"\n', "menu environment needs"),
    ('model = "m"\nrl = 5\n', "rl must be a table"),
    ('model = "m\n', "cannot read the config"),
])
def test_bad_configs_are_refused_with_the_file_and_key_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        TrainConfig.from_file(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_cli_reports_a_bad_config_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from policy.train_cli import main

    path = tmp_path / "bad.toml"
    path.write_text('model = "m"\n[sft]\nepochz = 2\n')
    assert main([str(path)]) == 2
    assert "unknown key(s) sft.epochz" in capsys.readouterr().err
