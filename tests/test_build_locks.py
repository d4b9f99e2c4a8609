"""torch's extension build lock, as the candidate worker patches it: an abandoned lock never blocks a build.

Each case runs the patched ``FileBaton`` in a fresh interpreter, beside real processes that hold or held the
lock file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

BATON = """
import os, sys, time
from pytest_cudal1.workers import build_locks
build_locks.install()
from torch.utils.file_baton import FileBaton
baton = FileBaton(sys.argv[1], wait_seconds=0.05)
print("ready", flush=True)
sys.stdin.readline()  # the test sets the lock up once torch is imported
if sys.argv[2] == "acquire":
    got = baton.try_acquire()
    print(got, open(sys.argv[1]).read() == str(os.getpid()) if got else "-")
else:
    start = time.monotonic()
    print(baton.try_acquire())
    baton.wait()
    print(round(time.monotonic() - start, 2), os.path.exists(sys.argv[1]))
"""


def baton(lock: Path, action: str) -> subprocess.Popen[str]:
    """A patched baton in its own interpreter, started and ready; ``go`` lets it act."""
    proc = subprocess.Popen([sys.executable, "-c", BATON, str(lock), action], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def go(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    out, _ = proc.communicate("go\n", timeout=timeout)
    return out


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_lock_whose_holder_died_is_taken_over(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    proc = baton(lock, "acquire")
    lock.write_text(str(dead_pid()))
    out = go(proc)
    assert out.split() == ["True", "True"], out  # acquired, and the file now names the new holder


def test_a_lock_held_by_a_live_process_is_waited_on_until_the_holder_dies(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    holder = subprocess.Popen(["sleep", "60"])
    lock.write_text(str(holder.pid))
    waiter = baton(lock, "wait")
    assert waiter.stdin is not None
    waiter.stdin.write("go\n")
    waiter.stdin.flush()
    time.sleep(2)
    assert waiter.poll() is None, "the waiter did not wait for a live holder"
    holder.kill()
    holder.wait()
    out = go(waiter)
    first, waited, left = out.split()
    assert first == "False" and float(waited) > 1.0 and left == "False", out


def test_an_empty_lock_is_respected_while_fresh_and_taken_over_when_old(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    proc = baton(lock, "acquire")
    lock.touch()
    fresh = go(proc)
    assert fresh.split() == ["False", "-"], fresh
    proc = baton(lock, "acquire")
    old = time.time() - 60
    os.utime(lock, (old, old))
    taken = go(proc)
    assert taken.split() == ["True", "True"], taken
