"""C = A @ B with irregular shapes in plain PyTorch: torch.mm into cuBLAS FP32 SGEMM (no TF32)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.mm(A, B)
