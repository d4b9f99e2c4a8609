"""Process-wide settings a user accepts a candidate changing (``--cudal1-allow-global``).

By default a drop-in module must leave its caller's process as it found it: the
candidate worker flags every changed setting (``workers/process_state.state_changes``).
Settings that only pick among algorithms of the same precision (cuDNN autotuning,
say) can be accepted by name; the controller drops them from the worker's flags
and the record names them (``global_flags_set``). The worker is never told which
are accepted. Settings that change numerics cannot be accepted.
"""

from __future__ import annotations

from typing import Any

# Short name -> the key the candidate worker reports it under.
ALGORITHM_SETTINGS = {
    "cudnn.benchmark": "torch.backends.cudnn.benchmark",
    "cudnn.deterministic": "torch.backends.cudnn.deterministic",
    "cudnn.enabled": "torch.backends.cudnn.enabled",
    "deterministic_algorithms": "torch.are_deterministic_algorithms_enabled()",
}


def parse_allowed(value: str | None) -> frozenset[str]:
    """``cudnn.benchmark,cudnn.deterministic`` -> the keys they name; ValueError for any other name."""
    names = [n.strip() for n in (value or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in ALGORITHM_SETTINGS and n not in ALGORITHM_SETTINGS.values()]
    if unknown:
        raise ValueError(f"cannot allow {', '.join(unknown)}: only algorithm-selection flags can be allowed "
                         f"({', '.join(ALGORITHM_SETTINGS)})")
    return frozenset(ALGORITHM_SETTINGS.get(n, n) for n in names)


class GlobalScreen:
    """Applied to each reply of a candidate worker: accepted settings leave its flags and are remembered."""

    def __init__(self, allowed: frozenset[str]) -> None:
        self.allowed = allowed
        self.accepted: set[str] = set()

    def __call__(self, reply: Any) -> Any:
        if not self.allowed or not isinstance(reply, dict) or not isinstance(reply.get("flags"), list):
            return reply
        reply["flags"] = [f for f in map(self._screen, reply["flags"]) if f is not None]
        return reply

    def _screen(self, flag: Any) -> Any:
        accepting = isinstance(flag, dict) and flag.get("code") == "GLOBAL_STATE_MODIFIED"
        settings = flag.get("settings") if accepting else None
        if not isinstance(settings, dict):
            return flag
        self.accepted |= {k for k in settings if k in self.allowed}
        rest = {k: v for k, v in settings.items() if k not in self.allowed}
        if not rest:
            return None
        return {**flag, "detail": "; ".join(list(rest.values())[:6]), "settings": rest}
