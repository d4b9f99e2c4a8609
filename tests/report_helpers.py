"""Helpers the report tests share: records made by hand (``rec``, ``timing``) and the page parsed into a tree
(``parse``, ``Node``), with the number comparisons the figures are checked by (``close``, ``num``)."""

from __future__ import annotations

import dataclasses
import html.parser
import math
from pathlib import Path
from typing import Any

from pytest_cudal1.reasons import Reason
from pytest_cudal1.records import JudgedRecord, PairedTiming, TimingSummary, Verdict

H200, A100 = "NVIDIA H200", "NVIDIA A100-SXM4-80GB"
ENV = {
    H200: {"gpu": H200, "driver": "550.54.15", "cuda": "12.4", "torch": "2.5.1", "host": "h200-a",
           "compute_capability": "9.0", "memory_bytes": 150_754_820_096, "device": "cuda", "commit": "abc123def456"},
    A100: {"gpu": A100, "driver": "535.161.08", "cuda": "12.2", "torch": "2.5.1", "host": "a100-b",
           "compute_capability": "8.0", "memory_bytes": 85_899_345_920, "device": "cuda", "commit": "abc123def456"},
    "cpu": {"cuda": None, "torch": "2.5.1", "host": "laptop", "device": "cpu"},
}


# ------------------------------------------------------------ test data ---

def timing(speedup: float, ref_ms: float = 1.0, ci: float = 0.05, **extra: Any) -> PairedTiming:
    def side(ms: float) -> TimingSummary:
        return TimingSummary(median_ms=ms, iqr_ms=ms * 0.02, min_ms=ms * 0.97, mean_ms=ms * 1.01, n=40,
                             clock="cuda_event")
    return PairedTiming(reference=side(ref_ms), candidate=side(ref_ms / speedup), speedup=speedup,
                        speedup_ci=(speedup * (1 - ci), speedup * (1 + ci)), pairs=40,
                        method="cuda events, L2 flushed, device-wide sync", stopped_because="converged", **extra)


def rec(gpu: str, task: str, cand: str, reason: Reason = Reason.OK, speedup: float | None = None, *,
        backend: str = "triton", when: str = "2025-06-01T10:00:00+00:00", evidence: dict | None = None,
        message: str = "", kernels: list[str] | None = None, sha: str | None = None, **timing_extra: Any) -> JudgedRecord:
    level = int(task[1])
    name = task.split("/", 1)[1]
    r = JudgedRecord(
        task_id=task, level=level, problem_id=int(name.split("_", 1)[0]), task_name=name, candidate_name=cand,
        candidate_sha256=sha or (cand.encode().hex() * 8)[:64],
        candidate_origin=f"kernelbench/candidates/level{level}/{name}/{cand}.py",
        backend=backend, device="cuda" if gpu != "cpu" else "cpu",
        verdict=Verdict(reason, message or (f"correct; speedup {speedup}" if reason is Reason.OK else f"{reason.value}!"),
                        evidence or {}),
        timing=timing(speedup, **timing_extra) if speedup is not None else None,
        environment=dict(ENV[gpu]), judged_at=when, seed=7, compile_s=1.5)
    if kernels is not None:
        r.kernels = kernels
    return r


# ------------------------------------------------------------- HTML tree ---

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclasses.dataclass(eq=False)
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Any] = dataclasses.field(default_factory=list)
    parent: "Node | None" = None

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.iter()

    def find_all(self, tag: str | None = None, **attrs: str) -> list["Node"]:
        want = {k.replace("_", "-"): v for k, v in attrs.items()}
        return [n for n in self.iter() if (tag is None or n.tag == tag)
                and all(n.attrs.get(k) == v if v is not True else k in n.attrs for k, v in want.items())]

    def find(self, tag: str | None = None, **attrs: str) -> "Node":
        found = self.find_all(tag, **attrs)
        assert found, f"no <{tag} {attrs}>"
        return found[0]

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class TreeBuilder(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.cur = self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, parent=self.cur)
        self.cur.children.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.cur.children.append(Node(tag, {k: v or "" for k, v in attrs}, parent=self.cur))

    def handle_endtag(self, tag: str) -> None:
        node = self.cur
        while node is not None and node.tag != tag:
            node = node.parent
        assert node is not None, f"stray </{tag}>"
        self.cur = node.parent or self.root

    def handle_data(self, data: str) -> None:
        self.cur.children.append(data)


def parse(path: Path) -> Node:
    builder = TreeBuilder()
    builder.feed(path.read_text(encoding="utf-8"))
    builder.close()
    assert builder.cur is builder.root, f"unclosed <{builder.cur.tag}>"
    return builder.root


def close(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9))


def num(s: str) -> float | None:
    return float(s) if s != "" else None


