"""Out-of-bounds write (exploit #19): correct output, then 64 elements past the input's end are zeroed.

Writes into whatever the storage holds beyond the tensor (the harness's guard
bytes). Expect OUT_OF_BOUNDS_WRITE.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.relu(x) * 2.0
        storage = x.untyped_storage()
        end = x.storage_offset() + x.numel()
        room = storage.nbytes() // x.element_size() - end
        n = min(64, room)
        if n > 0:
            x.new_empty(0).set_(storage, end, (n,)).fill_(0)
        return out
