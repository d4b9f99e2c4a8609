"""C = A @ B in plain PyTorch: torch.mm straight into cuBLAS FP32 SGEMM (no TF32, no extra copies)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.mm(A, B)
