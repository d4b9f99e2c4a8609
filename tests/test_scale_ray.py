"""``--cudal1-ray``: judge jobs on a local Ray cluster on the CPU; an actor killed mid-job loses nothing.

The cluster is started here (``ray start --head`` on 127.0.0.1, a free port outside Ray's worker
range 10002-19999, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` so Ray binds loopback only) and stopped
by killing the processes that name its temp dir (``ray stop --force`` would end every Ray
cluster of this user, other runs' too). Every call to Ray is wrapped in a timeout: a bad port hangs a driver.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cudal1_helpers import FAST, REPO, candidate_source, read_ledger, write_candidate, write_task

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.slow

LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}
SLOW = candidate_source(forward="time.sleep(0.5)\nreturn torch.relu(x)", header="import time")


def free_port() -> int:
    """A free loopback port from the kernel's ephemeral range (above Ray's worker ports)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port > 19999:
            return port


def ray_env(temp: Path) -> dict[str, str]:
    return {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "PYTHONPATH": str(REPO),
            "RAY_TMPDIR": str(temp), "RAY_USAGE_STATS_ENABLED": "0"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    """A head node on 127.0.0.1 with 4 logical CPUs (two CPU judge actors); its address and temp dir."""
    temp = Path("/tmp") / f"cudal1-ray-{os.getpid()}"  # short: Ray's socket paths have a length limit
    port = free_port()
    ports = [f"--ray-client-server-port={free_port()}", f"--dashboard-agent-listen-port={free_port()}",
             f"--dashboard-agent-grpc-port={free_port()}", f"--node-manager-port={free_port()}",
             f"--object-manager-port={free_port()}", f"--metrics-export-port={free_port()}",
             f"--runtime-env-agent-port={free_port()}"]
    env = ray_env(temp)
    subprocess.run(["ray", "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=4",
                    "--num-gpus=0", "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}",
                    "--object-store-memory=100000000", *ports],
                   env=env, check=True, timeout=180, capture_output=True)
    try:
        yield f"127.0.0.1:{port}", temp
    finally:
        procs = ray_processes(temp)
        for proc in procs:
            proc.terminate()
        _, alive = psutil.wait_procs(procs, timeout=15)
        for proc in alive:
            proc.kill()
        shutil.rmtree(temp, ignore_errors=True)


def ray_processes(temp: Path) -> list[psutil.Process]:
    """The cluster's processes (those naming its temp dir) and all their descendants."""
    found: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter(["cmdline"]):
        if any(str(temp) in part for part in proc.info["cmdline"] or []):
            for p in [proc, *proc.children(recursive=True)]:
                found[p.pid] = p
    return list(found.values())


def foreign_sockets(procs: list[psutil.Process]) -> list[str]:
    """Every inet socket of these processes whose local address is not loopback."""
    pids = {p.pid for p in procs}
    return [f"{c.laddr.ip}:{c.laddr.port} ({c.status}) pid {c.pid}" for c in psutil.net_connections(kind="inet")
            if c.pid in pids and c.laddr and c.laddr.ip not in LOOPBACK]


def kill_actor_judging(build_dir: Path, deadline: float) -> dict:
    """SIGKILL the Ray actor whose candidate worker runs in ``build_dir`` (the slow candidate's), mid-job."""
    while time.monotonic() < deadline:
        for proc in psutil.process_iter(["cmdline", "cwd"]):
            cmd = " ".join(proc.info["cmdline"] or [])
            if "pytest_cudal1.workers.candidate" in cmd and "--compile-only" not in cmd \
                    and proc.info["cwd"] == str(build_dir):
                actor = proc.parent()
                name = " ".join(actor.cmdline())
                actor.send_signal(signal.SIGKILL)
                return {"actor_pid": actor.pid, "actor": name}
        time.sleep(0.2)
    return {}


def test_jobs_run_on_actors_and_a_killed_actor_loses_nothing(cluster, tmp_path: Path) -> None:
    address, temp = cluster
    tasks, cands, cache = tmp_path / "tasks", tmp_path / "cands", tmp_path / "cache"
    for task in ("1_relu", "2_relu"):
        write_task(tasks, 1, task)
        write_candidate(cands, 1, task, "a")
    write_candidate(cands, 1, "1_relu", "slow", SLOW)
    slow_dir = cache / "builds" / hashlib.sha256(SLOW.encode()).hexdigest()
    seen: dict = {}

    def side() -> None:  # another process's view: kill the slow item's actor, check sockets meanwhile
        seen.update(kill_actor_judging(slow_dir, time.monotonic() + 240))
        seen["sockets"] = foreign_sockets(ray_processes(temp) + driver_tree())

    env = {k: v for k, v in ray_env(temp).items() if k != "PYTEST_ADDOPTS"}
    driver = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *FAST, "--cudal1-trials=3",
         f"--cudal1-tasks={tasks}", f"--cudal1-candidates={cands}", f"--cudal1-cache-dir={cache}",
         f"--cudal1-ray={address}", f"--cudal1-html={tmp_path / 'report.html'}"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def driver_tree() -> list[psutil.Process]:
        try:
            root = psutil.Process(driver.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    killer = threading.Thread(target=side)
    killer.start()
    try:
        out, _ = driver.communicate(timeout=480)
    finally:
        driver.kill()
        killer.join(timeout=300)
    assert driver.returncode == 0, out[-4000:]
    assert seen.get("actor", "").startswith("ray::JudgeActor"), (seen, out[-3000:])
    assert "cudal1: ray: 2 CPU judge actor(s) on 1 node(s)" in out
    assert "L1/1_relu::slow: judge actor died" in out and "re-queued (attempt 2 of 3)" in out, out[-3000:]

    records = read_ledger(tmp_path / "cudal1-ledger.jsonl")  # written by the controller alone
    ids = sorted(f"{r['task_id']}::{r['candidate_name']}" for r in records)
    assert ids == ["L1/1_relu::a", "L1/1_relu::slow", "L1/2_relu::a"]  # each once, the killed one too
    assert all(r["verdict"]["reason"] == "OK" for r in records)
    assert (tmp_path / "report.html").exists()
    for item in ids:
        assert item.split("::")[1] in out  # the summary lists every item

    # Every socket Ray opened (cluster, actors, driver) is on loopback: during the run and after it.
    assert seen["sockets"] == []
    assert foreign_sockets(ray_processes(temp)) == []
    assert len(ray_processes(temp)) > 3  # the check saw the cluster's processes, not an empty list


def test_ray_and_xdist_together_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    result = pytester.runpytest_subprocess("--cudal1", "--cudal1-ray=127.0.0.1:1", "-n", "2", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--cudal1-ray and -n: choose one*"])
