"""The report's optimizer view (issue 16): best speedup by round, the baselines, provenance, per-level figures.

Records are the judge's own ``JudgedRecord`` (``report_helpers.rec``), given an
``origin`` as ``policy.judging`` writes it; parents live in a real exemplar
database (``policy.exemplars.ExemplarDB``) and prompts in real files. The page
is parsed and each figure compared with values written out here by hand.
"""

from __future__ import annotations

import hashlib
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from report_helpers import A100, H200, Node, close, num, parse, rec, timing

from kernelbench.loaders import Task
from policy.exemplars import ExemplarDB, Origin
from pytest_cudal1 import ledger, report
from pytest_cudal1.reasons import Reason
from pytest_cudal1.records import JudgedRecord

RELU, GELU, LINEAR = "L1/1_ReLU", "L1/2_GELU_tanh", "L2/1_Linear_Bias_ReLU_Scale"
RELU_TASK = Task(1, 1, "1_ReLU", "import torch\n# the ReLU task\n", "tasks/level1/1_ReLU.py")
PROMPT_TEXT = "## Reference\n\n```python\nclass Model: ...\n```\n\nBeat 1.60x <script>alert(1)</script>\n"


def code(name: str) -> str:
    return f"# {name}\nimport torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def made(gpu: str, task: str, cand: str, speedup: float | None, call: float | None, rnd: int,
         reason: Reason = Reason.OK, *, parents: tuple[int, ...] = (), prompt: Path | None = None,
         policy: str = "builtin", backend: str = "torch") -> JudgedRecord:
    """An optimizer-made record: kernel ``speedup``, ``call`` speedup, made in round ``rnd``."""
    r = rec(gpu, task, cand, reason, speedup, backend=backend, sha=hashlib.sha256(code(cand).encode()).hexdigest())
    if call is not None:
        r.call_timing = timing(call)
    r.origin = {"policy": policy, "backend": "builtin" if policy == "builtin" else "openai:http://127.0.0.1:8000/v1",
                "round": rnd, "turn": 0, "parents": list(parents),
                "prompt_sha256": hashlib.sha256(PROMPT_TEXT.encode()).hexdigest() if prompt else None,
                "prompt_path": str(prompt) if prompt else None, "tokens": {"prompt": 812, "completion": 95}}
    return r


def optimizer_records(prompt: Path, parents: tuple[int, ...]) -> list[JudgedRecord]:
    """Three H200 tasks over rounds 0-2, one hand-written candidate, and a CPU run with a simulated Triton one."""
    hand = rec(H200, RELU, "triton_kernel", speedup=2.5)
    hand.call_timing = timing(1.4)
    return [
        made(H200, RELU, "builtin_compile_default", 1.3, 1.1, 0),
        made(H200, RELU, "builtin_compile_max_autotune", 1.6, 1.2, 0),
        made(H200, RELU, "builtin_compile_reduce_overhead", 9.0, 9.0, 0, Reason.WRONG_OUTPUT),  # rejected: no figure
        made(H200, RELU, "builtin_cuda_graph", 1.2, 2.0, 0),
        made(H200, RELU, "builtin_compile_max_autotune__cuda_graph", 1.9, 2.4, 1, parents=parents, prompt=prompt),
        made(H200, RELU, "gen_r2_0", 1.7, 1.5, 2, policy="openai", backend="triton"),
        made(H200, RELU, "gen_r2_1", None, None, 2, Reason.CRASH, policy="openai", backend="cuda"),
        made(H200, RELU, "numba_try", None, None, 2, Reason.BACKEND_UNAVAILABLE, policy="openai", backend="numba"),
        hand,
        made(H200, GELU, "builtin_compile_default", 0.8, 0.9, 0, prompt=prompt.with_name("gone.md")),
        made(H200, GELU, "builtin_cuda_graph", 1.5, 1.8, 0, prompt=prompt.with_name("gone.md")),
        made(H200, GELU, "builtin_cuda_graph__compile_default", 0.9, 1.0, 1),
        made(H200, LINEAR, "builtin_compile_default", 2.0, 1.5, 0),
        made(H200, LINEAR, "builtin_cuda_graph", None, None, 0, Reason.CUDA_ERROR),
        made(H200, LINEAR, "builtin_compile_default__cuda_graph", 3.0, None, 1),
        made("cpu", RELU, "builtin_compile_default", 1.1, 1.05, 0),
        made("cpu", RELU, "gen_triton", 5.0, 5.0, 1, policy="openai", backend="triton"),  # simulated on the CPU
    ]


@pytest.fixture
def db(tmp_path: Path) -> tuple[Path, list[int]]:
    """An exemplar database: the ReLU compile rewrite judged here, an A100 import, and nothing at id 999."""
    path = tmp_path / "exemplars.sqlite"
    here = made(H200, RELU, "builtin_compile_max_autotune", 1.6, 1.2, 0)
    there = made(A100, RELU, "release_fused_relu", 3.2, 2.9, 0)
    with ExemplarDB(path) as d:
        ids = [d.add(here.to_json(), code(here.candidate_name), RELU_TASK, Origin("builtin", 0)),
               d.add(there.to_json(), code(there.candidate_name), RELU_TASK, Origin("import:a100.jsonl"))]
    return path, [*ids, 999]


def page(tmp_path: Path, records: list[JudgedRecord], db_path: Path | None = None) -> Node:
    out = report.build_report([r.to_json() for r in records], tmp_path / "report.html", db_path=db_path)
    return parse(out)


def rows_of(doc: Node, table: str, **attrs: str) -> list[Node]:
    return doc.find("table", id=table).find("tbody").find_all("tr", **attrs)


@pytest.fixture
def doc(tmp_path: Path, db: tuple[Path, list[int]]) -> Node:
    prompt = tmp_path / "prompts" / "relu_r1.md"
    prompt.parent.mkdir()
    prompt.write_text(PROMPT_TEXT, encoding="utf-8")
    return page(tmp_path, optimizer_records(prompt, tuple(db[1])), db[0])


def chart_points(doc: Node, gpu: str, task: str, measure: str) -> list[tuple[int, float | None]]:
    article = doc.find("article", data_gpu=gpu, data_task=task)
    svg = article.find("svg", data_chart="rounds", data_measure=measure)
    return [(int(c.attrs["data-round"]), num(c.attrs["data-best"])) for c in svg.find_all("circle")]


def test_chart_has_one_point_per_round_with_the_best_so_far(doc: Node) -> None:
    assert chart_points(doc, H200, RELU, "kernel") == [(0, 1.6), (1, 1.9), (2, 1.9)]  # the rejected 9x counts nowhere
    assert chart_points(doc, H200, RELU, "call") == [(0, 2.0), (1, 2.4), (2, 2.4)]
    assert chart_points(doc, H200, GELU, "kernel") == [(0, 1.5), (1, 1.5)]
    assert chart_points(doc, H200, LINEAR, "kernel") == [(0, 2.0), (1, 3.0)]
    assert chart_points(doc, H200, LINEAR, "call") == [(0, 1.5), (1, 1.5)]  # round 1's best has no call timing
    assert chart_points(doc, "cpu", RELU, "kernel") == [(0, 1.1), (1, 1.1)]  # the simulated 5x is no speed
    svg = doc.find("article", data_gpu=H200, data_task=RELU).find("svg", data_chart="rounds", data_measure="kernel")
    lines = {ln.attrs["data-baseline"]: num(ln.attrs["data-value"]) for ln in svg.find_all("line", data_baseline=True)}
    assert lines == {"eager": 1.0, "torch.compile": 1.6, "CUDA graphs": 1.2}
    ys = [float(c.attrs["cy"]) for c in svg.find_all("circle")]
    assert ys[0] > ys[1] == ys[2]  # higher speedup, higher on the page


def test_baseline_columns_per_task(doc: Node) -> None:
    def columns(gpu: str, task: str, measure: str) -> dict[str, float | None]:
        (row,) = rows_of(doc, "optimizer-tasks", data_gpu=gpu, data_task=task)
        return {td.attrs["data-col"]: num(td.attrs["data-value"]) for td in row.find_all("td", data_measure=measure)}

    assert columns(H200, RELU, "kernel") == {"eager": 1.0, "torch.compile": 1.6, "CUDA graphs": 1.2,
                                             "optimizer": 1.9, "best overall": 2.5}
    assert columns(H200, RELU, "call") == {"eager": 1.0, "torch.compile": 1.2, "CUDA graphs": 2.0,
                                           "optimizer": 2.4, "best overall": 2.4}
    assert columns(H200, LINEAR, "kernel") == {"eager": 1.0, "torch.compile": 2.0, "CUDA graphs": None,
                                               "optimizer": 3.0, "best overall": 3.0}
    assert columns("cpu", RELU, "kernel")["optimizer"] == 1.1
    tasks = [(r.attrs["data-gpu"], r.attrs["data-task"]) for r in rows_of(doc, "optimizer-tasks")]
    assert tasks == [(H200, RELU), (H200, GELU), (H200, LINEAR), ("cpu", RELU)]


def test_baselines_are_found_by_the_rewrite_the_optimizer_recorded(tmp_path: Path) -> None:
    """The optimizer names its candidates by round (``r1_c1``) and records the built-in rewrite in the origin:
    the baselines come from there (session 27's 30-task run showed empty baseline columns)."""
    def by_round(cand: str, rewrite: str | None, speedup: float, call: float, rnd: int) -> JudgedRecord:
        r = made(H200, RELU, cand, speedup, call, rnd)
        if rewrite is not None:
            r.origin["rewrite"] = rewrite
        return r

    doc = page(tmp_path, [by_round("r1_c0", "builtin_compile_default", 1.4, 1.1, 1),
                          by_round("r1_c1", "builtin_cuda_graph", 1.2, 1.3, 1),
                          by_round("r2_c0", "builtin_compile_default__cuda_graph", 1.6, 1.5, 2),
                          by_round("r2_c1", None, 2.0, 2.0, 2)])  # a model's answer: no baseline
    (row,) = rows_of(doc, "optimizer-tasks", data_gpu=H200, data_task=RELU)
    kernel = {td.attrs["data-col"]: num(td.attrs["data-value"]) for td in row.find_all("td", data_measure="kernel")}
    assert kernel == {"eager": 1.0, "torch.compile": 1.4, "CUDA graphs": 1.2, "optimizer": 2.0, "best overall": 2.0}


def test_best_candidate_provenance_prompt_and_parents(doc: Node, db: tuple[Path, list[int]]) -> None:
    here_id, a100_id, missing_id = db[1]
    prov = doc.find("dl", data_gpu=H200, data_task=RELU)
    best = prov.find("a", data_role="best")
    assert best.text() == "builtin_compile_max_autotune__cuda_graph"
    target = doc.find("tr", id=best.attrs["href"][1:])
    assert (target.attrs["data-task"], target.attrs["data-candidate"]) == (RELU, best.text())
    assert "policy builtin" in prov.find("dd", data_field="origin").text()
    assert "round 1" in prov.find("dd", data_field="origin").text()
    assert prov.find("details", data_role="prompt").find("pre").text() == PROMPT_TEXT  # embedded, escaped

    parents = {int(li.attrs["data-parent"]): li for li in prov.find_all("li", data_parent=True)}
    assert list(parents) == [here_id, a100_id, missing_id]
    row = doc.find("tr", id=parents[here_id].find("a").attrs["href"][1:])  # judged in this report: linked
    assert (row.attrs["data-task"], row.attrs["data-candidate"]) == (RELU, "builtin_compile_max_autotune")
    assert not parents[a100_id].find_all("a")  # only in the database: its code and speedups from there
    assert parents[a100_id].find("pre", data_role="code").text() == code("release_fused_relu")
    assert "release_fused_relu" in parents[a100_id].text() and "3.20×" in parents[a100_id].text()
    assert "not in the exemplar database" in parents[missing_id].text()


def test_missing_prompt_file_and_no_database(tmp_path: Path) -> None:
    prompt = tmp_path / "relu_r1.md"
    records = optimizer_records(prompt, (4, 5))  # the prompt file was never written
    doc = page(tmp_path, records)
    prov = doc.find("dl", data_gpu=H200, data_task=RELU)
    assert not prov.find_all("details", data_role="prompt")
    missing = prov.find("span", data_role="prompt-missing").text()
    assert "not readable" in missing and str(prompt) in missing
    assert [li.text().strip() for li in prov.find_all("li", data_parent=True)] == \
        ["exemplar #4 (no exemplar database given (--db))", "exemplar #5 (no exemplar database given (--db))"]
    linear = doc.find("dl", data_gpu=H200, data_task=LINEAR)
    assert "no prompt recorded" in linear.find("dd", data_field="prompt").text()


def test_changed_prompt_file_is_flagged(tmp_path: Path) -> None:
    prompt = tmp_path / "relu_r1.md"
    prompt.write_text(PROMPT_TEXT + "edited later\n", encoding="utf-8")
    prov = page(tmp_path, optimizer_records(prompt, ())).find("dl", data_gpu=H200, data_task=RELU)
    assert "does not hash to the recorded prompt_sha256" in prov.find("details", data_role="prompt").text()


def test_per_level_fast_1_and_geomean(doc: Node) -> None:
    def cells(gpu: str, scope: str, measure: str) -> dict[str, tuple[float | None, float | None, int]]:
        (row,) = rows_of(doc, "optimizer-levels", data_gpu=gpu, data_scope=scope, data_measure=measure)
        out: dict[str, Any] = {}
        for col in ("optimizer", "eager", "torch.compile", "CUDA graphs"):
            f = row.find("td", data_col=col, data_stat="fast_1")
            g = row.find("td", data_col=col, data_stat="geomean")
            out[col] = (num(f.attrs["data-value"]), num(g.attrs["data-value"]), int(g.attrs["data-n"]))
        return out

    def same(got: dict[str, tuple], want: dict[str, tuple]) -> bool:
        return got.keys() == want.keys() and all(close(g[0], w[0]) and close(g[1], w[1]) and g[2] == w[2]
                                                 for g, w in zip(got.values(), want.values()))

    # level 1: ReLU and GELU; kernel bests: optimizer 1.9, 1.5; torch.compile 1.6, 0.8; CUDA graphs 1.2, 1.5
    assert same(cells(H200, "level 1", "kernel"), {
        "optimizer": (1.0, math.sqrt(1.9 * 1.5), 2), "eager": (0.0, 1.0, 2),
        "torch.compile": (0.5, math.sqrt(1.6 * 0.8), 2), "CUDA graphs": (1.0, math.sqrt(1.2 * 1.5), 2)})
    assert same(cells(H200, "level 2", "kernel"), {
        "optimizer": (1.0, 3.0, 1), "eager": (0.0, 1.0, 1), "torch.compile": (1.0, 2.0, 1),
        "CUDA graphs": (0.0, None, 0)})
    assert same(cells(H200, "all", "call"), {
        "optimizer": (1.0, (2.4 * 1.8 * 1.5) ** (1 / 3), 3), "eager": (0.0, 1.0, 3),
        "torch.compile": (2 / 3, (1.2 * 0.9 * 1.5) ** (1 / 3), 3), "CUDA graphs": (2 / 3, math.sqrt(2.0 * 1.8), 2)})
    assert same(cells("cpu", "all", "kernel"), {
        "optimizer": (1.0, 1.1, 1), "eager": (0.0, 1.0, 1), "torch.compile": (1.0, 1.1, 1),
        "CUDA graphs": (0.0, None, 0)})


def test_no_optimizer_section_without_origin(tmp_path: Path) -> None:
    hand = [rec(H200, RELU, "triton_kernel", speedup=2.5), rec(H200, GELU, "torch_fast", speedup=1.1, backend="torch")]
    skipped_only = made(H200, LINEAR, "numba_try", None, None, 0, Reason.BACKEND_UNAVAILABLE, backend="numba")
    for records in (hand, [*hand, skipped_only]):  # a skipped record counts nowhere, here neither
        html = report.render_report(records)
        assert 'id="optimizer' not in html and 'href="#optimizer"' not in html
    html = report.render_report(optimizer_records(tmp_path / "p.md", ()))
    assert 'id="optimizer"' in html and 'href="#optimizer"' in html


def test_merge_command_with_db(tmp_path: Path, db: tuple[Path, list[int]]) -> None:
    ledger_path = tmp_path / "ledger.jsonl"
    for r in optimizer_records(tmp_path / "p.md", tuple(db[1])):
        ledger.append(ledger_path, r)
    out = tmp_path / "merged.html"
    cmd = [sys.executable, "-m", "pytest_cudal1.report", str(out), str(ledger_path)]
    proc = subprocess.run([*cmd, "--db", str(db[0])], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    prov = parse(out).find("dl", data_gpu=H200, data_task=RELU)
    assert prov.find("pre", data_role="code").text() == code("release_fused_relu")

    bad = tmp_path / "not-a-db.sqlite"
    bad.write_bytes(b"this is not sqlite at all" * 100)
    proc = subprocess.run([*cmd, "--db", str(bad)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "not a readable exemplar database" in parse(out).find("p", data_field="db").text()
    assert bad.read_bytes() == b"this is not sqlite at all" * 100  # left untouched

    proc = subprocess.run([*cmd, "--db", str(tmp_path / "nowhere.sqlite")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "nowhere.sqlite" in proc.stderr
