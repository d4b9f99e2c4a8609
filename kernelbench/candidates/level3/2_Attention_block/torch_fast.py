"""Attention block with one fused q/k/v projection GEMM and scaled_dot_product_attention."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, embed_dim: int):
        super().__init__()
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.embed_dim = embed_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        projs = (self.q_proj, self.k_proj, self.v_proj)
        weight = torch.cat([p.weight for p in projs])
        bias = torch.cat([p.bias for p in projs])
        q, k, v = F.linear(x, weight, bias).chunk(3, dim=-1)
        return self.out_proj(F.scaled_dot_product_attention(q, k, v))
