"""The report's Training section: ``cudal1-train``'s metrics log drawn as curves per stage.

The log is written by the trainer's own writer (``policy.train_log.MetricsLog``)
from the step metrics its reward function computes (``JudgeReward.metrics``)
over the judge's ``JudgedRecord``s, so the section reads exactly what a training
run writes. The page is parsed and every point compared with the logged values.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import statistics
from pathlib import Path

import pytest
from report_helpers import Node, parse, rec

from policy.judge_reward import JudgeReward
from policy.train_config import RewardSettings, TrainConfig
from policy.train_log import MetricsLog
from policy.trainer import write_report
from pytest_cudal1 import report
from pytest_cudal1.reasons import Reason

RELU, GELU = "L1/1_ReLU", "L1/2_GELU_tanh"
ALIAS, TIMER = Reason.OUTPUT_ALIASES_INPUT, Reason.TIMER_MISMATCH
# Per RL step: (task, reason, speedup) of each completion, and the shaped rewards the step gave them.
RL_STEPS = [
    ([(RELU, ALIAS, None), (RELU, ALIAS, None), (RELU, Reason.WRONG_OUTPUT, None), (RELU, Reason.OK, 1.2)],
     [-1.5, -1.5, -1.5, 0.0]),
    ([(RELU, ALIAS, None), (RELU, Reason.OK, 1.5), (GELU, TIMER, None), (GELU, Reason.OK, 0.8)],
     [-1.5, 0.7, -1.5, -0.4]),
    ([(RELU, Reason.OK, 1.5), (RELU, Reason.OK, 2.5), (GELU, Reason.OK, 1.1), (GELU, TIMER, None)],
     [0.2, 1.5, 0.1, -1.5]),
    ([(RELU, Reason.OK, 2.0), (RELU, Reason.OK, 2.5), (GELU, Reason.OK, 1.3), (GELU, Reason.OK, 1.3)],
     [0.9, 1.2, 0.3, 0.3]),
]
SELF_SUPERVISED = [([(RELU, Reason.OK, 1.1), (RELU, Reason.WRONG_OUTPUT, None)], [0.0, -1.5])]


def write_log(path: Path) -> list[dict]:
    """Two self-supervised then four RL steps through the trainer's writer; the metrics written, in order."""
    log = MetricsLog(path, console=None, tensorboard=False)
    reward = JudgeReward(session=None, tasks=[], to_code=str, settings=RewardSettings())  # type: ignore[arg-type]
    written = []
    for stage, steps in (("self_supervised", SELF_SUPERVISED), ("rl", RL_STEPS)):
        reward.stage = stage
        for step, (completions, rewards) in enumerate(steps):
            records = [rec("cpu", task, f"{stage}-{step}-{i}", reason, speedup)
                       for i, (task, reason, speedup) in enumerate(completions)]
            judge_s = len(records) * (0.5 + step)  # the step's total: 0.5 + step seconds per completion
            metrics = reward.metrics(step, records, rewards, [False] * len(records), judge_s)
            log.write(metrics)
            written.append(metrics)
    return written


@pytest.fixture()
def train_log(tmp_path: Path) -> tuple[Path, list[dict]]:
    path = tmp_path / "out" / "metrics.jsonl"
    written = write_log(path)
    with path.open("a", encoding="utf-8") as f:  # lines a reader must pass over
        f.write(json.dumps(rec("cpu", RELU, "a_ledger_line", speedup=1.0).to_json()) + "\n")
        f.write("not json\n")
        f.write('{"stage": "rl", "step": 9, "reward_mean": 0.1')  # torn: still being written
    return path, written


def points(svg: Node, series: str) -> list[tuple[int, float, float, float]]:
    """(step, value, x, y) of each point of one series."""
    group = svg.find("g", data_series=series)
    return [(int(c.attrs["data-step"]), float(c.attrs["data-value"]), float(c.attrs["cx"]), float(c.attrs["cy"]))
            for c in group.find_all("circle")]


def chart(stage: Node, name: str) -> Node:
    return stage.find("svg", data_chart=name)


def test_curves_have_one_point_per_logged_step_with_the_logged_values(train_log: tuple[Path, list[dict]],
                                                                      tmp_path: Path) -> None:
    path, written = train_log
    out = report.build_report([rec("cpu", RELU, "reference", speedup=1.0)], tmp_path / "r.html", metrics_log=path)
    page = parse(out)
    section = page.find("section", id="training")
    assert page.find("nav").find("a", href="#training")
    assert [a.attrs["data-stage"] for a in section.find_all("article")] == ["self_supervised", "rl"]
    rl = section.find("article", data_stage="rl")
    logged = [m for m in written if m["stage"] == "rl"]

    reward = points(chart(rl, "reward"), "reward mean")
    assert [(s, v) for s, v, _, _ in reward] == [(m["step"], pytest.approx(m["reward_mean"])) for m in logged]
    assert [p[1] for p in points(chart(rl, "success"), "success rate")] == [0.25, 0.5, 0.75, 1.0]
    assert [p[1] for p in points(chart(rl, "judge_s"), "judge s / completion")] == [0.5, 1.5, 2.5, 3.5]
    xs = [x for _, _, x, _ in reward]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)  # steps left to right

    # The band spans mean ± std: upper and lower edges are symmetric about each mean point,
    # and their half-widths are in proportion to the logged standard deviations.
    band = [tuple(map(float, p.split(","))) for p in chart(rl, "reward").find("polygon", data_role="band")
            .attrs["points"].split()]
    upper, lower = band[:len(logged)], band[len(logged):][::-1]
    assert [u[0] for u in upper] == [lo[0] for lo in lower] == xs
    half = []
    for (_, _, _, cy), (_, uy), (_, ly) in zip(reward, upper, lower):
        assert math.isclose(uy + ly, 2 * cy, abs_tol=0.02) and uy < cy < ly
        half.append((ly - uy) / 2)
    stds = [statistics.pstdev(rewards) for _, rewards in RL_STEPS]
    assert all(math.isclose(h / half[0], s / stds[0], rel_tol=0.01) for h, s in zip(half, stds))

    # Cheats: one line per reason the judge caught (honest failures are not cheats), 0 where none.
    cheats = chart(rl, "cheats")
    assert {g.attrs["data-series"] for g in cheats.find_all("g")} == {ALIAS.value, TIMER.value}
    legend = rl.find("figure", data_chart="cheats").find_all("span", data_series=True)
    assert [s.attrs["data-series"] for s in legend] == [ALIAS.value, TIMER.value]
    assert [p[1] for p in points(cheats, ALIAS.value)] == [2, 1, 0, 0]
    assert [p[1] for p in points(cheats, TIMER.value)] == [0, 1, 1, 0]
    # Best speedup so far, per task; GELU has no point before its first success.
    best = chart(rl, "best")
    assert [(s, v) for s, v, _, _ in points(best, RELU)] == [(0, 1.2), (1, 1.5), (2, 2.5), (3, 2.5)]
    assert [(s, v) for s, v, _, _ in points(best, GELU)] == [(1, 0.8), (2, 1.1), (3, 1.3)]

    row = section.find("table", id="training-summary").find("tr", data_stage="rl")
    stat = {td.attrs["data-stat"]: td for td in row.find_all("td") if "data-stat" in td.attrs}
    assert stat["steps"].attrs["data-value"] == "4" and stat["completions"].attrs["data-value"] == "16"
    assert float(stat["reward_final"].attrs["data-value"]) == pytest.approx(statistics.fmean(RL_STEPS[-1][1]))
    assert float(stat["reward_best"].attrs["data-value"]) == pytest.approx(max(m["reward_mean"] for m in logged))
    assert float(stat["success_final"].attrs["data-value"]) == 1.0
    assert float(stat["judge_s"].attrs["data-value"]) == pytest.approx(2.0)  # 4 judged per step, 0.5..3.5 s
    assert {s.attrs["data-reason"]: int(s.attrs["data-count"]) for s in stat["cheats"].find_all("span")} == \
        {ALIAS.value: 3, TIMER.value: 2}
    assert {d.attrs["data-task"]: float(d.attrs["data-value"]) for d in stat["best"].find_all("div")} == \
        {RELU: 2.5, GELU: 1.3}

    ss = section.find("article", data_stage="self_supervised")
    assert [p[:2] for p in points(chart(ss, "reward"), "reward mean")] == [(0, -0.75)]
    assert ss.find("figure", data_chart="cheats").find("p", data_chart="none")  # no cheat caught: no chart
    assert "<script src" not in out.read_text() and "<link rel=\"stylesheet\"" not in out.read_text()


def test_no_training_section_without_a_log_and_a_note_for_an_empty_one(tmp_path: Path) -> None:
    records = [rec("cpu", RELU, "reference", speedup=1.0)]
    page = parse(report.build_report(records, tmp_path / "plain.html"))
    assert not page.find_all("section", id="training") and not page.find_all("a", href="#training")
    empty = tmp_path / "metrics.jsonl"
    empty.write_text("")
    section = parse(report.build_report(records, tmp_path / "empty.html", metrics_log=empty)).find(
        "section", id="training")
    assert section.find("p", id="training-empty") and not section.find_all("svg")


def test_cli_takes_a_train_log_and_refuses_a_missing_one(train_log: tuple[Path, list[dict]], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_cudal1 import ledger

    led = tmp_path / "ledger.jsonl"
    ledger.append(led, rec("cpu", RELU, "reference", speedup=1.0))
    out = tmp_path / "r.html"
    assert report.main([str(out), str(led), "--train-log", str(train_log[0])]) == 0
    rl = parse(out).find("section", id="training").find("article", data_stage="rl")
    assert len(points(chart(rl, "reward"), "reward mean")) == len(RL_STEPS)
    assert report.main([str(tmp_path / "plain.html"), str(led)]) == 0
    assert not parse(tmp_path / "plain.html").find_all("section", id="training")
    with pytest.raises(SystemExit) as exc:
        report.main([str(tmp_path / "x.html"), str(led), "--train-log", str(tmp_path / "missing.jsonl")])
    assert exc.value.code == 2 and "missing.jsonl" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_the_trainer_writes_its_report_and_a_failure_to_render_is_printed_not_raised(
        train_log: tuple[Path, list[dict]], tmp_path: Path) -> None:
    from pytest_cudal1 import ledger

    config = TrainConfig(model="m", ledger=str(tmp_path / "ledger.jsonl"), output_dir=str(tmp_path / "out"))
    ledger.append(Path(config.ledger), rec("cpu", RELU, "rl-00001-0000-000", speedup=1.4))
    console = io.StringIO()
    path = write_report(config, train_log[0], console)
    assert path == tmp_path / "out" / "report.html" and f"report: {path}" in console.getvalue()
    page = parse(path)
    assert page.find("section", id="training") and page.find("tr", data_candidate="rl-00001-0000-000")

    blocked = dataclasses.replace(config, report=str(tmp_path / "a_folder"))
    (tmp_path / "a_folder").mkdir()
    console = io.StringIO()
    assert write_report(blocked, train_log[0], console) is None
    assert "report not written" in console.getvalue() and "a_folder" in console.getvalue()
    assert write_report(dataclasses.replace(config, report=""), train_log[0], console) is None  # "": no report


def test_the_report_path_in_a_config_file_is_relative_to_the_file(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('model = "m"\nreport = "pages/train.html"\n')
    assert TrainConfig.from_file(path).report == str(tmp_path / "pages" / "train.html")
    path.write_text('model = "m"\n')
    assert TrainConfig.from_file(path).report is None  # the default: OUTPUT/report.html
