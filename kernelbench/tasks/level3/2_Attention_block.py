import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """Single-head self-attention: q/k/v projections, softmax(q k^T / sqrt(d)) v, output projection."""

    def __init__(self, embed_dim: int):
        super().__init__()
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.embed_dim = embed_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.q_proj(x)
        k = self.k_proj(x)
        v = self.v_proj(x)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.embed_dim)
        attn = torch.softmax(scores, dim=-1)
        return self.out_proj(torch.matmul(attn, v))


batch_size = 4
seq_len = 32
embed_dim = 64


def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim)]


def get_init_inputs():
    return [embed_dim]
