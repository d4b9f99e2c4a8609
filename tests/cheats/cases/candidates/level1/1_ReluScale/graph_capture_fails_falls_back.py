"""Control: honest. Its first call tries to capture itself as a CUDA graph, and a host sync inside the capture
invalidates it (its own bug; in CUDA-L1's L2/73 a cuDNN convolution's first call, which allocates, does the
same in a fresh process). It catches the error and calls eagerly from then on. torch's allocator still counted
the failed capture as underway, and the worker aborted when the harness dropped its placements' memory pools
(CRASH). Expect OK."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.tried = False

    def forward(self, x):
        if not self.tried and x.is_cuda:
            self.tried = True
            try:
                with torch.cuda.graph(torch.cuda.CUDAGraph()):
                    float((torch.relu(x) * 2.0).sum())  # a host sync: not allowed while capturing
            except Exception:  # noqa: BLE001 - whatever the capture raised, eager calls follow
                pass
        return torch.relu(x) * 2.0
