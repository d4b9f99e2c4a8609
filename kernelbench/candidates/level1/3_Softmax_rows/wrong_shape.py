"""Known-wrong candidate: correct softmax values but an extra unit axis, so the output shape is wrong."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1).unsqueeze(1)
