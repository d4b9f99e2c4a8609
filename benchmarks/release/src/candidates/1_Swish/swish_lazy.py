# expect: LAZY_OUTPUT
"""Returns a tensor subclass that only computes Swish when the checker touches it."""
import torch
import torch.nn as nn


class Deferred(torch.Tensor):
    @staticmethod
    def __new__(cls, src):
        t = torch.Tensor._make_subclass(cls, torch.zeros_like(src))
        t._src = src
        t._todo = True
        return t

    def __init__(self, src):
        pass

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in list(args) + list((kwargs or {}).values()):
            if isinstance(a, Deferred) and a.__dict__.get("_todo"):
                a._todo = False
                with torch._C.DisableTorchFunctionSubclass():
                    a.copy_(a._src * torch.sigmoid(a._src))
        return super().__torch_function__(func, types, args, kwargs or {})


class ModelNew(nn.Module):
    def forward(self, x):
        return Deferred(x)
