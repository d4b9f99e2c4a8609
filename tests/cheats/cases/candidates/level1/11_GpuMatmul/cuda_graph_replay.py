"""Control: a CUDA graph captured in __init__ and replayed on fresh inputs.

Each call copies the inputs into the graph's static buffers, replays, and
returns a clone of the static output: correct for every input, new storage
every call. Expect OK.
"""
import torch
import torch.nn as nn

N = 4096


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graph = None
        self.shapes = None
        if torch.cuda.is_available():
            self._capture((N, N), (N, N), torch.float32, torch.device("cuda", torch.cuda.current_device()))

    def _capture(self, shape_a, shape_b, dtype, device):
        self.static_a = torch.zeros(shape_a, dtype=dtype, device=device)
        self.static_b = torch.zeros(shape_b, dtype=dtype, device=device)
        warm = torch.cuda.Stream(device=device)
        warm.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(warm):
            for _ in range(2):
                torch.matmul(self.static_a, self.static_b)
        torch.cuda.current_stream(device).wait_stream(warm)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_out = torch.matmul(self.static_a, self.static_b)
        self.shapes = (tuple(shape_a), tuple(shape_b), dtype, device)

    def forward(self, A, B):
        if self.graph is None or self.shapes != (tuple(A.shape), tuple(B.shape), A.dtype, A.device):
            self._capture(tuple(A.shape), tuple(B.shape), A.dtype, A.device)
        self.static_a.copy_(A)
        self.static_b.copy_(B)
        self.graph.replay()
        return self.static_out.clone()
