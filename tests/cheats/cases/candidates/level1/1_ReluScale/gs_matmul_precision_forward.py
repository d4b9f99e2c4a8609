"""Global state (exploit #10): lower float32 matmul precision from inside forward. Expect GLOBAL_STATE_MODIFIED."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        torch.set_float32_matmul_precision("medium")
        return torch.relu(x) * 2.0
