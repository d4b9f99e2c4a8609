"""The tamper watch: any rebinding of the harness's own objects in the candidate's process is named.

Everything the watch holds is bound at import, before the candidate module is loaded, and compared by
identity after import, ``__init__`` and each call (``TamperWatch.tampered``).
"""

from __future__ import annotations

import builtins
import os
import sys
import time
import types
from typing import Any

import torch

WATCHED_METHODS = {
    torch.Tensor: ("__eq__", "clone", "to", "cpu", "copy_", "data_ptr", "__torch_function__"),
    torch.cuda.Event: ("record", "elapsed_time", "synchronize", "query"),
    torch.nn.Module: ("__call__", "_call_impl"),
}


# Names a module's globals may shadow: a global named ``max`` set in ``timed_loop`` after import would answer its
# calls of ``max`` (the escaped-time clamp) in place of the builtin, with no watched binding changed.
_BUILTIN_NAMES = frozenset(n for n in vars(builtins) if not n.startswith("__"))
SHADOWS = " (a builtin's name)"


def _is_harness(name: str, mod: Any) -> bool:
    # The worker itself runs as ``__main__``: its request loop's globals are as much the harness's.
    return mod is not None and getattr(getattr(mod, "__spec__", None), "name", name).startswith("pytest_cudal1")


def _watched(modules: list[str]) -> dict[str, Any]:
    """What the watch compares: ``modules`` are the harness's names in ``sys.modules`` (``TamperWatch``)."""
    import ctypes
    import inspect

    objs: dict[str, Any] = {
        "torch.allclose": torch.allclose, "torch.isclose": torch.isclose, "torch.equal": torch.equal,
        "torch.testing.assert_close": torch.testing.assert_close,
        "torch.cuda.synchronize": torch.cuda.synchronize, "torch.cuda.Event": torch.cuda.Event,
        "torch.no_grad": torch.no_grad,
        "time.perf_counter": time.perf_counter, "time.perf_counter_ns": time.perf_counter_ns,
        "time.monotonic": time.monotonic, "time.time": time.time,
        "os.write": os.write,
    }
    for cls, names in WATCHED_METHODS.items():
        for name in names:  # static lookup: a classmethod makes a new bound object on every access
            objs[f"{cls.__module__}.{cls.__qualname__}.{name}"] = inspect.getattr_static(cls, name, None)
    # Every builtin the harness calls (a rebound ``float`` made the wire's encoder refuse every number).
    objs.update({f"builtins.{attr}": val for attr, val in vars(builtins).items() if callable(val)})
    for name in modules:
        mod = sys.modules.get(name)
        if _is_harness(name, mod):
            objs[f"sys.modules[{name!r}]"] = mod  # a stand-in module would serve a later import
            for attr, val in vars(mod).items():
                if attr in _BUILTIN_NAMES:
                    objs[f"{name}.{attr}{SHADOWS}"] = val
                # Every callable a harness module holds, its own and those it bound (the timed region's
                # ``_perf_counter_ns`` is time's function: a rebound one shortened every sample), and its
                # C library handles (``_libc``, ``_cudart``).
                if callable(val) or isinstance(val, ctypes.CDLL):
                    _watch(objs, f"{name}.{attr}", val)
                    if isinstance(val, type) and val.__module__ == name:  # harness classes: their methods too
                        for meth, fn in vars(val).items():
                            if callable(fn) or isinstance(fn, (staticmethod, classmethod)):
                                _watch(objs, f"{name}.{attr}.{meth}", fn)
                elif isinstance(val, types.ModuleType):  # the modules it calls through (``timed_loop.memory``)
                    objs[f"{name}.{attr}"] = val
                elif attr.isupper() and isinstance(val, (int, float, str, bytes, tuple, frozenset)):
                    objs[f"{name}.{attr}"] = val  # its constants (a tail allowance, a hold, a tolerance)
    return objs


def _watch(objs: dict[str, Any], key: str, val: Any) -> None:
    objs[key] = val
    code = getattr(val, "__code__", None)
    if code is not None:
        objs[f"{key}.__code__"] = code


class TamperWatch:
    """Remembers the harness's functions, handles, constants and modules, the builtins, the timers and the checkers;
    reports any rebinding."""

    def __init__(self) -> None:
        # The harness's modules, found once: what a check compares depends on no other entry of ``sys.modules``,
        # and looking through all of them (~1,200 with torch's) was most of a check's ~1 ms, paid every timed sample.
        self.modules = [name for name, mod in list(sys.modules.items()) if _is_harness(name, mod)]
        # The objects themselves, not their ids: held here, none can be freed and its address reused by a
        # replacement (a float constant rebound twice would otherwise come back at the same id).
        self.objs = _watched(self.modules)

    def tampered(self) -> str | None:
        now = _watched(self.modules)
        bad = [k for k, v in self.objs.items() if k not in now or now[k] is not v]
        bad += [k for k in now if k.endswith(SHADOWS) and k not in self.objs  # of a module watched before
                and f"sys.modules[{k.rsplit('.', 1)[0]!r}]" in self.objs]
        # Those rebound first: a rebound builtin (``isinstance``, ``float``) can also hide constants from the watch.
        bad.sort(key=lambda k: (k not in now, k))
        return f"replaced: {', '.join(bad[:8])}" if bad else None
