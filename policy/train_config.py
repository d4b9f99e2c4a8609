"""``cudal1-train``'s configuration: dataclasses beside the trainer (TRL's style), loadable from JSON or TOML.

One file describes a run: the model, the tasks and where verdicts go (ledger,
exemplar database, judge work folder), the judge's settings, and the three
stages of CUDA-L1 (SFT, self-supervised rounds, contrastive RL). Every section
maps one-to-one to a dataclass below; an unknown key is an error naming its
place (``rl.lerning_rate``), so a typo never silently trains with a default.
Relative paths are relative to the config file's folder, so a config travels
with its data. Fields left ``None`` fall back to TRL's own defaults.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, Union

STAGES = ("sft", "self_supervised", "rl")
ALGORITHMS = ("grpo", "rloo")
ENVIRONMENTS = ("contrastive", "menu")


class ConfigError(ValueError):
    """The config file cannot be used; the message names the file and the key."""


@dataclasses.dataclass
class JudgeSettings:
    """The judge's knobs (``JudgeConfig`` and ``TimingConfig``); defaults are the judge's own."""

    trials: int = 5
    time_budget_s: float = 10.0  # timing budget per pair (``TimingConfig.budget_s``)
    min_pairs: int = 10
    max_pairs: int = 200
    call_timeout: float = 60.0
    compile_timeout: float = 600.0
    speedup: str = "kernel"  # the measure the reward is taken from: kernel or call
    list_kernels: bool = True  # list each candidate's GPU kernels (the profiler's first use costs ~5.7 s on the H200)
    seed: int = 0


@dataclasses.dataclass
class PromptSettings:
    """The contrastive prompt: N exemplars drawn by the bucket sampler at temperature τ."""

    exemplars: int = 2
    tau: float = 2.0
    template_dir: str | None = None
    chat: bool = False  # send prompts as one user message (chat models) rather than plain text


@dataclasses.dataclass
class EnvironmentSettings:
    """Where prompts come from and how an answer becomes code.

    ``contrastive``: the CUDA-L1 prompt, answers parsed for ``class ModelNew``.
    ``menu``: a fixed ``prompt`` and named candidate ``programs`` (name -> file) for
    one task; an answer's first program name is the program judged. It lets a
    model too small to write code learn from the real judge (tests, smoke runs).
    """

    kind: str = "contrastive"
    prompt: str = ""
    programs: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class LoraSettings:
    """``peft.LoraConfig`` fields; the adapter is trained in every stage when given."""

    r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    target_modules: Union[str, list[str]] = "all-linear"


@dataclasses.dataclass
class SFTSettings:
    """Stage 1: supervised fine-tuning on (prompt of a task -> one of its successful candidates)."""

    enabled: bool = True
    ledgers: list[str] = dataclasses.field(default_factory=list)  # imported into the database first
    code_search: list[str] = dataclasses.field(default_factory=list)  # where the ledgers' code is found
    epochs: float = 1.0
    learning_rate: float = 2e-5
    per_device_train_batch_size: int = 4
    max_length: int | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)  # any other ``SFTConfig`` field


@dataclasses.dataclass
class SelfSupervisedSettings:
    """Stage 2: rounds of sample -> judge -> fine-tune on the successes (reward 1 for success, 0 otherwise)."""

    rounds: int = 0
    prompts_per_round: int = 8
    samples: int = 4  # completions per prompt
    max_new_tokens: int = 4096
    temperature: float = 1.0
    epochs: float = 1.0
    learning_rate: float = 2e-5
    per_device_train_batch_size: int = 4
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class RewardSettings:
    """Judge verdict -> training reward: log-speedup, rolling mean/std normalisation, clip; failures at -clip."""

    clip: float = 1.5
    window: int = 1000  # successes the rolling mean and std are taken over
    min_std: float = 0.05  # in log-speedup units: a window of equal speedups does not divide by zero
    reuse_verdicts: bool = True  # the same code for the same task, judged already in this run


@dataclasses.dataclass
class RLSettings:
    """Stage 3: contrastive RL on TRL's ``GRPOTrainer`` (or ``RLOOTrainer``) with the judge as reward."""

    enabled: bool = True
    algorithm: str = "grpo"
    loss_type: str | None = None  # GRPO only; None: TRL's default (dapo in TRL 1.16)
    beta: float | None = None  # KL to the reference policy; None: TRL's default (GRPO 0.0, RLOO 0.05)
    num_generations: int = 8  # G, completions per prompt
    learning_rate: float = 1e-6
    max_steps: int = 100
    per_device_train_batch_size: int = 8
    max_completion_length: int = 4096
    temperature: float = 1.0
    save_steps: int = 50
    use_vllm: bool = False
    vllm_mode: str = "colocate"  # or "server" (a ``trl vllm-serve`` on other GPUs)
    vllm_server_base_url: str | None = None
    reward: RewardSettings = dataclasses.field(default_factory=RewardSettings)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)  # any other ``GRPOConfig``/``RLOOConfig`` field


@dataclasses.dataclass
class TrainConfig:
    """One training run; see the module docstring for the file format."""

    model: str
    tasks: str | None = None  # folder, JSONL or .py; None: the bundled tasks
    task_ids: list[str] = dataclasses.field(default_factory=list)  # e.g. ["L1/1_ReLU"]; empty: all
    ledger: str = "cudal1-train-ledger.jsonl"
    db: str = "cudal1-train.sqlite"
    workdir: str = "cudal1-train-work"  # the judge's builds, logs and candidate files
    output_dir: str = "cudal1-train-out"  # checkpoints, final models, the metrics log
    report: str | None = None  # the HTML report written at the end; None: OUTPUT/report.html; "": none
    resume: bool = False
    seed: int = 0
    use_cpu: bool = False
    bf16: bool | None = None  # None: bf16 when not on the CPU
    judge: JudgeSettings = dataclasses.field(default_factory=JudgeSettings)
    prompts: PromptSettings = dataclasses.field(default_factory=PromptSettings)
    environment: EnvironmentSettings = dataclasses.field(default_factory=EnvironmentSettings)
    lora: LoraSettings | None = None
    sft: SFTSettings = dataclasses.field(default_factory=SFTSettings)
    self_supervised: SelfSupervisedSettings = dataclasses.field(default_factory=SelfSupervisedSettings)
    rl: RLSettings = dataclasses.field(default_factory=RLSettings)

    def __post_init__(self) -> None:
        checks = [
            (self.rl.algorithm in ALGORITHMS, f"rl.algorithm must be one of {ALGORITHMS}, not {self.rl.algorithm!r}"),
            (self.environment.kind in ENVIRONMENTS,
             f"environment.kind must be one of {ENVIRONMENTS}, not {self.environment.kind!r}"),
            (self.rl.algorithm == "grpo" or self.rl.loss_type is None,
             "rl.loss_type is a GRPO option; RLOOTrainer has none"),
            (self.rl.reward.clip > 0 and self.rl.reward.window >= 1 and self.rl.reward.min_std > 0,
             "rl.reward needs clip > 0, window >= 1 and min_std > 0"),
            (self.rl.per_device_train_batch_size % self.rl.num_generations == 0,
             "rl.per_device_train_batch_size must be a multiple of rl.num_generations (whole groups per step)"),
            (self.environment.kind != "menu" or (self.environment.programs and len(self.task_ids) == 1),
             "a menu environment needs environment.programs and exactly one task in task_ids"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)

    @classmethod
    def from_file(cls, path: str | Path) -> "TrainConfig":
        """Read a ``.toml`` or ``.json`` file; relative paths become relative to its folder."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
            data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError and json.JSONDecodeError are ValueErrors
            raise ConfigError(f"{path}: cannot read the config ({exc})") from None
        if path.suffix not in (".toml", ".json"):
            raise ConfigError(f"{path}: a config is a .toml or .json file")
        try:
            config = from_dict(cls, data)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        return config.resolved(path.parent)

    def resolved(self, base: Path) -> "TrainConfig":
        """A copy with its file paths made absolute against ``base`` (the model may be a hub id: kept if absent)."""

        def at(p: str) -> str:
            return str(p if Path(p).is_absolute() else (base / p).resolve())

        model = at(self.model) if (base / self.model).exists() else self.model
        env = dataclasses.replace(self.environment, programs={k: at(v) for k, v in self.environment.programs.items()})
        sft = dataclasses.replace(self.sft, ledgers=[at(p) for p in self.sft.ledgers],
                                  code_search=[at(p) for p in self.sft.code_search])
        prompts = dataclasses.replace(self.prompts, template_dir=self.prompts.template_dir and at(
            self.prompts.template_dir))
        return dataclasses.replace(
            self, model=model, tasks=self.tasks and at(self.tasks), ledger=at(self.ledger), db=at(self.db),
            workdir=at(self.workdir), output_dir=at(self.output_dir), report=self.report and at(self.report),
            environment=env, sft=sft, prompts=prompts)


def from_dict(cls: type, data: Any, where: str = "") -> Any:
    """``cls(**data)`` with nested sections built recursively and unknown keys refused by name."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where.rstrip('.') or 'the config'} must be a table/object, not {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        names = ", ".join(f"{where}{k}" for k in unknown)
        raise ConfigError(f"unknown key(s) {names}; known here: {', '.join(fields)}")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, value in data.items():
        nested = _dataclass_in(hints[name])
        values[name] = from_dict(nested, value, f"{where}{name}.") if nested and value is not None else value
    try:
        return cls(**values)
    except TypeError as exc:  # a required key is missing
        raise ConfigError(f"{where or 'the config'}: {exc}") from None


def _dataclass_in(hint: Any) -> type | None:
    """The dataclass in ``hint`` (``X`` or ``X | None``), if any."""
    options = typing.get_args(hint) if typing.get_origin(hint) in (Union, types.UnionType) else (hint,)
    return next((o for o in options if dataclasses.is_dataclass(o)), None)
