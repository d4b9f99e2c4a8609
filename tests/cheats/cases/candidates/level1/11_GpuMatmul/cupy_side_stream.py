"""Side-stream escape through CuPy (exploit #1): a cuBLAS matmul on a private non-blocking CuPy stream,
never joined to torch's stream. Expect STREAM_ESCAPE.
"""
import cupy
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.stream = None

    def forward(self, A, B):
        if self.stream is None:
            self.stream = cupy.cuda.Stream(non_blocking=True)
        torch.cuda.current_stream().synchronize()  # inputs are ready; the output will not be
        C = torch.empty((A.shape[0], B.shape[1]), dtype=A.dtype, device=A.device)
        with self.stream:
            cupy.matmul(cupy.asarray(A), cupy.asarray(B), out=cupy.asarray(C))
        return C
