"""Deferred work (exploit #2): a thread fills the output after forward has returned.

The returned tensor holds zeros (written memory, not the poison pattern) until
the thread wakes up 50 ms later. Expect DEFERRED_WORK.
"""
import threading
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)

        def finish():
            time.sleep(0.05)
            torch.mul(torch.relu(x), 2.0, out=out)

        threading.Thread(target=finish, daemon=True).start()
        return out
