"""Square matmul as a hand-written i-k-j C++ loop (vectorizable inner loop) in a load_inline CPU extension."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cpu() && b.is_cpu() && a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "expects float32 CPU tensors");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "shape mismatch");
    auto A = a.contiguous(), B = b.contiguous();
    const int64_t m = A.size(0), k = A.size(1), n = B.size(1);
    auto out = torch::zeros({m, n}, A.options());
    const float* pa = A.data_ptr<float>();
    const float* pb = B.data_ptr<float>();
    float* pc = out.data_ptr<float>();
    for (int64_t i = 0; i < m; ++i) {
        float* crow = pc + i * n;
        for (int64_t p = 0; p < k; ++p) {
            const float aip = pa[i * k + p];
            const float* brow = pb + p * n;
            for (int64_t j = 0; j < n; ++j) crow[j] += aip * brow[j];
        }
    }
    return out;
}
"""

_ext = load_inline(
    name="cudal1_bundled_l1_5_square_matmul",
    cpp_sources=_SOURCE,
    functions=["matmul_forward"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.matmul_forward(A, B)
