"""CUDA-L1's L2/91 pattern: ``torch.compile(mode="reduce-overhead")`` with its output returned uncloned. Each call
replays one CUDA graph into the same static output, so call n+1 overwrites what call n returned; torch's CUDA-graph
trees make the earlier output raise when read. Expect OUTPUT_REPLAY (it crashed the harness's own check before).
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mm = torch.compile(torch.matmul, mode="reduce-overhead")

    def forward(self, A, B):
        return self.mm(A, B)
