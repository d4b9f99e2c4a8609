"""Seeds of what the candidate must not predict, drawn apart from the seed its model is built under.

Both models are built after ``torch.manual_seed(weight seed)`` (``--cudal1-seed``) so that their
weights match, and a candidate reads that seed back with ``torch.initial_seed()``. Nothing the
checks draw may follow from it: the timing inputs, the pair order and which pairs are audited come
from a *judge seed* that the controller draws from the OS (``secrets``) after ``ModelNew`` is built,
one per item (``--cudal1-judge-seed`` fixes it to reproduce a run); the trial recipes from a *task
seed* drawn once per task and run (``task_seed``), so the reference's trial outputs serve every
candidate of the task.

Each draw is a keyed hash (BLAKE2b) of its purpose and a counter, not a Mersenne Twister: the
candidate sees every timed call's seed, and the Twister's state can be solved from some 650 of
its outputs; a keyed hash's outputs say nothing about the next one or about the key.
"""

from __future__ import annotations

import hashlib
import random
import secrets

SEED_BITS = 63


def draw_judge_seed() -> int:
    """A fresh judge seed from the OS: nothing in the candidate's process follows from it."""
    return secrets.randbits(SEED_BITS)


class KeyedRandom(random.Random):
    """``random.Random`` whose numbers are BLAKE2b(key, purpose, counter): reproducible from the key,
    unpredictable without it however many of them one has seen."""

    def __init__(self, key: int, purpose: str) -> None:
        self._key = key.to_bytes(16, "little")
        self._purpose = purpose.encode()
        self._counter = 0
        super().__init__()

    def seed(self, *_args: object, **_kwargs: object) -> None:  # random.Random.__init__ calls it
        pass

    def _word(self) -> int:
        self._counter += 1
        digest = hashlib.blake2b(self._purpose + self._counter.to_bytes(8, "little"), key=self._key, digest_size=8)
        return int.from_bytes(digest.digest(), "little")

    def random(self) -> float:
        return (self._word() >> 11) * (1.0 / (1 << 53))

    def getrandbits(self, k: int) -> int:
        bits, value = 0, 0
        while bits < k:
            value |= self._word() << bits
            bits += 64
        return value & ((1 << k) - 1)


def task_seed(judge_seed: int | None, task_sha256: str) -> int:
    """A task's trial seed for one run: from the OS, or (``--cudal1-judge-seed``) from the judge seed
    and the task's hash, so a given judge seed reproduces every task's recipes."""
    if judge_seed is None:
        return draw_judge_seed()
    return KeyedRandom(judge_seed, f"trials/{task_sha256}").getrandbits(SEED_BITS)


def derived(key: int, purpose: str) -> int:
    """One 31-bit seed for ``purpose`` (a torch or hypothesis seed) from the judge seed ``key``."""
    return KeyedRandom(key, purpose).getrandbits(31)
