"""Control: two threads each fill half of the output and are joined before forward returns. Expect OK."""
import threading

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        half = x.shape[0] // 2

        def work(lo, hi):
            torch.mul(torch.relu(x[lo:hi]), 2.0, out=out[lo:hi])

        threads = [threading.Thread(target=work, args=(0, half)), threading.Thread(target=work, args=(half, x.shape[0]))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out
