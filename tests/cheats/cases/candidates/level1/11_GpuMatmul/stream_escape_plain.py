"""Side-stream escape (exploit #1), the plain form measured at 122x: matmul on a private stream, never joined.

Expect STREAM_ESCAPE.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, A, B):
        if self.side is None:
            self.side = torch.cuda.Stream(device=A.device)
        self.side.wait_stream(torch.cuda.current_stream(A.device))
        with torch.cuda.stream(self.side):
            out = torch.matmul(A, B)
        return out
