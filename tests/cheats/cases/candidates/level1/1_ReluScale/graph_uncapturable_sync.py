"""Control: honest, but reads a value back to the host in every call (a legal, slow habit), so its calls
cannot be captured as a CUDA graph. Expect OK, timed eagerly on both sides, the method saying why.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        if bool(torch.isnan(x).any()):  # a host sync: not allowed while a graph is captured
            raise ValueError("NaN input")
        return torch.relu(x) * 2.0
