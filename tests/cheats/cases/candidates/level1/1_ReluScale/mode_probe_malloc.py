"""Mode probe (issue 14, item 2): tells calls apart by what a fresh host allocation holds.

Each call allocates a scratch block and looks for the harness's fill patterns in it (glibc's
malloc fill, 0xA5 bytes, or the poison word 0x7FA5A5A5 of a freed output-sized block). It
remembers what the first call (a trial) saw; any later call that sees otherwise gets a wrong
answer. Expect OK: the allocator behaves alike in checked and timed calls.
"""
import torch
import torch.nn as nn

MALLOC_FILL = -0x5A5A5A5B  # 0xA5A5A5A5
POISON = 0x7FA5A5A5


def _filled(device):
    scratch = torch.empty(4096, dtype=torch.int32, device=device)
    out = torch.empty(16 * 256, dtype=torch.int32, device=device)  # the output's size: a poisoned block
    return bool((scratch == MALLOC_FILL).any()) or bool((out == POISON).any() | (out == MALLOC_FILL).any())


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = None

    def forward(self, x):
        filled = _filled(x.device)
        if self.first is None:
            self.first = filled
        out = torch.relu(x) * 2.0
        return out if filled == self.first else out + 1.0
