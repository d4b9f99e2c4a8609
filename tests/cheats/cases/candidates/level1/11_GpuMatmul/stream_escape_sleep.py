"""Side-stream escape (exploit #1), made certain: sleep then matmul on a private stream, never joined.

The side stream first waits for the caller's stream (so the inputs are ready),
spins ~10 ms, then multiplies; forward returns before any of it has finished.
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
            torch.cuda._sleep(20_000_000)
            out = torch.matmul(A, B)
        return out
