# expect: DEFERRED_WORK
"""Returns zeros at once; a background thread writes Swish into them 50 ms later."""
import threading
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)

        def later():
            time.sleep(0.05)
            torch.mul(x, torch.sigmoid(x), out=out)

        threading.Thread(target=later, daemon=True).start()
        return out
