"""Mode probe (issue 14, item 2): tells calls apart by what a fresh host allocation holds.

Each call allocates a scratch block and looks for the harness's fill patterns in it (glibc's
malloc fill, 0xA5 bytes, or the poison word 0x7FA5A5A5 of a freed output-sized block). It
remembers what the first call (a trial) saw; any later call that sees otherwise gets a wrong
answer, and a line in ``mode_probe_malloc.wrong`` beside this file. On the CPU, timed calls run without
glibc's fill; a recycled heap block may still hold a trial's, so whether it ever answers wrong varies
from run to run, and the test reads that file: WRONG_OUTPUT if it did, OK if it did not.
"""
from pathlib import Path

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
        if filled == self.first:
            return out
        with open(Path(__file__).with_suffix(".wrong"), "a") as note:
            note.write("wrong\n")
        return out + 1.0
