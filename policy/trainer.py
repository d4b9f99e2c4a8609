"""CUDA-L1's three training stages on TRL, with the judge as the only source of reward.

1. **SFT** (``SFTTrainer``): (a task's prompt -> one of its successful candidates)
   pairs from the exemplar database, after importing the configured ledgers.
2. **Self-supervised rounds**: sample answers, judge them, fine-tune on the
   successes (reward 1 for success, 0 otherwise: REINFORCE on positives only).
3. **Contrastive RL** (``GRPOTrainer``, or ``RLOOTrainer`` for a leave-one-out
   baseline): prompts come from a ``datasets.IterableDataset`` whose generator
   draws each prompt when TRL asks for it, so exemplars the judge has just
   passed show up in the next prompts; rewards from ``JudgeReward``.

Every judged answer of every stage goes to the ledger and the exemplar database
(``JudgingSession``), and each step's metrics to ``OUTPUT/metrics.jsonl``.
At the end, ``OUTPUT/report.html`` (``report``) shows the ledger's records and
the metrics as training curves. Each stage saves its final model to ``OUTPUT/<stage>/final``; with ``resume``,
finished stages are skipped (their model is loaded) and RL continues from its
last checkpoint. trl, transformers, peft and datasets are imported here only,
inside functions: the rest of the package works without the ``train`` extra.
"""

from __future__ import annotations

import dataclasses
import math
import random
import sys
from pathlib import Path
from typing import Any, Sequence, TextIO

from kernelbench.loaders import Task, load_tasks
from policy.environments import ContrastiveEnvironment, Environment, MenuEnvironment
from policy.exemplars import ExemplarDB, gpu_of
from policy.judge_reward import JudgeReward
from policy.judging import JudgingSession
from policy.prompts import PromptBuilder
from policy.sampler import BucketSampler
from policy.train_config import STAGES, JudgeSettings, TrainConfig
from policy.train_log import MetricsLog, read
from pytest_cudal1 import environment as machine
from pytest_cudal1 import ledger
from pytest_cudal1.report import build_report

DONE = "DONE"


@dataclasses.dataclass
class TrainResult:
    """What a run did: the trained model, the stages run (not skipped) and where its records are."""

    model: Any
    stages_run: list[str]
    metrics_log: Path
    ledger: Path
    report: Path | None = None  # None: not configured, or it could not be written (the console says why)


def select_tasks(config: TrainConfig) -> list[Task]:
    tasks, errors = load_tasks(config.tasks)
    if errors:
        raise ValueError("tasks could not be loaded: " + "; ".join(f"{e.path}: {e.message}" for e in errors))
    if config.task_ids:
        by_id = {t.id: t for t in tasks}
        missing = [i for i in config.task_ids if i not in by_id]
        if missing:
            raise ValueError(f"task_ids not among the tasks of {config.tasks or 'the bundled set'}: {missing}")
        tasks = [by_id[i] for i in config.task_ids]
    return tasks


def judge_settings(s: JudgeSettings) -> dict[str, Any]:
    """``JudgeConfig`` keyword arguments for ``JudgingSession.standalone``."""
    from pytest_cudal1.timing import TimingConfig

    timing = TimingConfig(budget_s=s.time_budget_s, min_pairs=s.min_pairs, max_pairs=s.max_pairs,
                          call_timeout=s.call_timeout)
    return {"trials": s.trials, "call_timeout": s.call_timeout, "compile_timeout": s.compile_timeout,
            "speedup": s.speedup, "timing": timing, "list_kernels": s.list_kernels}


def make_environment(config: TrainConfig, tasks: Sequence[Task], db: ExemplarDB, gpu: str) -> Environment:
    env, prompts = config.environment, config.prompts
    if env.kind == "menu":
        return MenuEnvironment.from_files(tasks[0], env.prompt, env.programs, prompts.chat)
    sampler = BucketSampler(score=lambda e: e.speedup or 0.0, n=prompts.exemplars, tau=prompts.tau)
    return ContrastiveEnvironment(tasks, db, gpu, PromptBuilder(prompts.template_dir), sampler,
                                  random.Random(config.seed), prompts.chat)


def run_training(config: TrainConfig, environment: Environment | None = None,
                 console: TextIO | None = sys.stderr) -> TrainResult:
    """Run the enabled stages of ``config`` in order; ``environment`` overrides the configured one."""
    tasks = list(environment.tasks) if environment is not None else select_tasks(config)
    out = Path(config.output_dir)
    log = MetricsLog(out / "metrics.jsonl", console)
    gpu = gpu_of({"environment": machine.describe(), "device": "cuda" if machine.has_gpu() else "cpu"})
    with ExemplarDB(config.db) as db:
        session = JudgingSession.standalone(Path(config.workdir), Path(config.ledger), db, seed=config.judge.seed,
                                            **judge_settings(config.judge))
        try:
            env = environment or make_environment(config, tasks, db, gpu)
            reward = JudgeReward(session, tasks, env.to_code, config.rl.reward, on_step=log.write)
            if config.resume:
                refill(reward, log.path)
            enabled = [s for s in STAGES if (config.self_supervised.rounds > 0 if s == "self_supervised"
                                             else getattr(config, s).enabled)]
            done = [s for s in enabled if config.resume and (out / s / DONE).exists()]
            model, tokenizer = load_model(config, out / done[-1] / "final" if done else None)
            ran = []
            for stage in enabled:
                if stage in done:
                    continue
                reward.stage = stage
                if stage == "sft":
                    model = sft_stage(config, model, tokenizer, env, db, gpu, tasks, console)
                elif stage == "self_supervised":
                    model = self_supervised_stage(config, model, tokenizer, env, reward, tasks)
                else:
                    model = rl_stage(config, model, tokenizer, env, reward, tasks)
                save_final(model, tokenizer, out / stage)
                ran.append(stage)
        finally:
            session.close()
    return TrainResult(model, ran, log.path, Path(config.ledger), write_report(config, log.path, console))


def write_report(config: TrainConfig, metrics_log: Path, console: TextIO | None) -> Path | None:
    """The HTML report of the run's ledger and training curves; a failure to render is printed, never raised."""
    if config.report == "":
        return None
    out = Path(config.report) if config.report else Path(config.output_dir) / "report.html"
    try:
        records = list(ledger.read(config.ledger)) if Path(config.ledger).exists() else []
        path = build_report(records, out, f"cudal1-train: {config.model}", sources=[config.ledger],
                            metrics_log=metrics_log if metrics_log.exists() else None)
    except Exception as exc:  # the trained model and its records matter more than their page
        if console is not None:
            print(f"[cudal1-train] report not written ({out}): {type(exc).__name__}: {exc}", file=console)
        return None
    if console is not None:
        print(f"[cudal1-train] report: {path}", file=console)
    return path


def refill(reward: JudgeReward, log_path: Path) -> None:
    """Put the logged successes' log-speedups back into the normaliser's window (a resumed run)."""
    for entry in read(log_path):
        reward.normalizer.window.extend(math.log(i["judge_reward"]) for i in entry["items"]
                                        if i["reason"] == "OK" and i["judge_reward"] > 0)


# ------------------------------------------------------------------ models ---

def load_model(config: TrainConfig, finished: Path | None = None) -> tuple[Any, Any]:
    """The model (with a LoRA adapter when configured) and its tokenizer; ``finished``: a stage's saved model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(config.model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if config.lora is None:
        return AutoModelForCausalLM.from_pretrained(finished or config.model), tokenizer
    from peft import LoraConfig, PeftModel, get_peft_model

    base = AutoModelForCausalLM.from_pretrained(config.model)
    if finished is not None:
        return PeftModel.from_pretrained(base, str(finished), is_trainable=True), tokenizer
    lora = LoraConfig(task_type="CAUSAL_LM", **dataclasses.asdict(config.lora))
    return get_peft_model(base, lora), tokenizer


def save_final(model: Any, tokenizer: Any, stage_dir: Path) -> None:
    """The stage's model (or adapter) in ``stage_dir/final``, then the marker that the stage finished."""
    model.save_pretrained(str(stage_dir / "final"))
    tokenizer.save_pretrained(str(stage_dir / "final"))
    (stage_dir / DONE).write_text("finished\n")


def training_args(cls: type, config: TrainConfig, output_dir: Path, extra: dict[str, Any], **fields: Any) -> Any:
    """A TRL config (``SFTConfig``, ``GRPOConfig``, ``RLOOConfig``) with the run's device, precision and logging."""
    import importlib.util

    import torch

    bf16 = config.bf16 if config.bf16 is not None else (
        not config.use_cpu and torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    report = "tensorboard" if importlib.util.find_spec("tensorboard") else "none"
    return cls(output_dir=str(output_dir), use_cpu=config.use_cpu, bf16=bf16, report_to=report, seed=config.seed,
               logging_steps=1, disable_tqdm=True, **{**fields, **extra})


def fine_tune(config: TrainConfig, model: Any, tokenizer: Any, rows: list[dict[str, Any]], output_dir: Path,
              settings: Any) -> Any:
    """Supervised fine-tuning on prompt-completion rows (loss on the completion only); the trained model."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    args = training_args(SFTConfig, config, output_dir, settings.extra, num_train_epochs=settings.epochs,
                         learning_rate=settings.learning_rate, save_strategy="no",
                         per_device_train_batch_size=settings.per_device_train_batch_size,
                         **({"max_length": settings.max_length} if getattr(settings, "max_length", None) else {}))
    data = Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in rows])
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
    trainer.train()
    return trainer.model


def _completion(prompt: Any, text: str) -> Any:
    """An SFT target in the prompt's format: text, or an assistant message after chat messages."""
    return text if isinstance(prompt, str) else [{"role": "assistant", "content": text}]


# ------------------------------------------------------------------ stages ---

def sft_rows(env: Environment, db: ExemplarDB, gpu: str, tasks: Sequence[Task]) -> list[dict[str, Any]]:
    """One (prompt, answer) row per success this judge measured on this GPU that the environment can say."""
    rows = []
    for task in tasks:
        for exemplar in db.successes(task.sha256, gpu):
            answer = env.answer(exemplar.code)
            if answer is not None:
                row = env.prompt(task)
                rows.append({**row, "completion": _completion(row["prompt"], answer)})
    return rows


def sft_stage(config: TrainConfig, model: Any, tokenizer: Any, env: Environment, db: ExemplarDB, gpu: str,
              tasks: Sequence[Task], console: TextIO | None) -> Any:
    for path in config.sft.ledgers:
        report = db.import_ledger(path, tasks, config.sft.code_search)
        if console is not None:
            print(f"[cudal1-train] sft: imported {path}: {report}", file=console)
    rows = sft_rows(env, db, gpu, tasks)
    if not rows:
        if console is not None:
            print("[cudal1-train] sft: no successful candidates in the database for these tasks; skipped",
                  file=console)
        return model
    return fine_tune(config, model, tokenizer, rows, Path(config.output_dir) / "sft", config.sft)


def sample(model: Any, tokenizer: Any, prompts: Sequence[Any], n: int, max_new_tokens: int,
           temperature: float) -> list[list[str]]:
    """``n`` sampled completions per prompt with transformers ``generate`` (text or chat prompts)."""
    import torch

    texts = [p if isinstance(p, str) else tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True)
             for p in prompts]
    tokenizer.padding_side = "left"
    batch = tokenizer(texts, return_tensors="pt", padding=True).to(model.device)
    with torch.no_grad():
        out = model.generate(**batch, do_sample=True, temperature=temperature, max_new_tokens=max_new_tokens,
                             num_return_sequences=n, pad_token_id=tokenizer.pad_token_id)
    decoded = tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
    return [decoded[i * n:(i + 1) * n] for i in range(len(prompts))]


def self_supervised_stage(config: TrainConfig, model: Any, tokenizer: Any, env: Environment, reward: JudgeReward,
                          tasks: Sequence[Task]) -> Any:
    s = config.self_supervised
    rng = random.Random(config.seed)
    for round_ in range(s.rounds):
        rows = [env.prompt(rng.choice(list(tasks))) for _ in range(s.prompts_per_round)]
        answers = sample(model, tokenizer, [r["prompt"] for r in rows], s.samples, s.max_new_tokens, s.temperature)
        flat = [(row, text) for row, texts in zip(rows, answers) for text in texts]
        records, _ = reward.score([r["task_id"] for r, _ in flat], [t for _, t in flat], round_,
                                  [r["prompt_sha256"] for r, _ in flat], [r["parents"] for r, _ in flat])
        good = [{"prompt": row["prompt"], "completion": _completion(row["prompt"], text)}
                for (row, text), record in zip(flat, records) if record.verdict.passed]
        if good:
            model = fine_tune(config, model, tokenizer, good,
                              Path(config.output_dir) / "self_supervised" / f"round-{round_}", s)
    return model


def prompt_dataset(env: Environment, tasks: Sequence[Task], seed: int, chat: bool) -> Any:
    """An endless ``IterableDataset``: each row drawn (task, then exemplars from the database) when TRL asks."""
    from datasets import Features, IterableDataset, List, Value

    prompt = List({"role": Value("string"), "content": Value("string")}) if chat else Value("string")
    features = Features({"prompt": prompt, "task_id": Value("string"), "prompt_sha256": Value("string"),
                         "parents": List(Value("int64"))})

    def rows() -> Any:
        rng = random.Random(seed)
        while True:
            yield env.prompt(rng.choice(list(tasks)))

    return IterableDataset.from_generator(rows, features=features)


def rl_stage(config: TrainConfig, model: Any, tokenizer: Any, env: Environment, reward: JudgeReward,
             tasks: Sequence[Task]) -> Any:
    from transformers.trainer_utils import get_last_checkpoint
    from trl import GRPOConfig, GRPOTrainer, RLOOConfig, RLOOTrainer

    rl = config.rl
    grpo = rl.algorithm == "grpo"
    fields: dict[str, Any] = dict(
        learning_rate=rl.learning_rate, max_steps=rl.max_steps, num_generations=rl.num_generations,
        per_device_train_batch_size=rl.per_device_train_batch_size, max_completion_length=rl.max_completion_length,
        temperature=rl.temperature, save_steps=rl.save_steps, use_vllm=rl.use_vllm, vllm_mode=rl.vllm_mode,
        vllm_server_base_url=rl.vllm_server_base_url, shuffle_dataset=False,
        ignore_data_skip=True,  # prompts are drawn anew: a resumed run need not replay the old ones
    )
    if rl.beta is not None:
        fields["beta"] = rl.beta
    if grpo and rl.loss_type is not None:
        fields["loss_type"] = rl.loss_type
    output_dir = Path(config.output_dir) / "rl"
    args = training_args(GRPOConfig if grpo else RLOOConfig, config, output_dir, rl.extra, **fields)
    trainer_cls = GRPOTrainer if grpo else RLOOTrainer
    trainer = trainer_cls(model=model, reward_funcs=reward, args=args,
                          train_dataset=prompt_dataset(env, tasks, config.seed, config.prompts.chat),
                          processing_class=tokenizer)
    checkpoint = get_last_checkpoint(str(output_dir)) if config.resume and output_dir.is_dir() else None
    trainer.train(resume_from_checkpoint=checkpoint)
    return trainer.model
