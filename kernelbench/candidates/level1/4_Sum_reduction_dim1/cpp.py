"""Sum over the reduced dimension (moved last) as a hand-written C++ row loop in a load_inline CPU extension."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
torch::Tensor row_sum_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cpu() && x.scalar_type() == torch::kFloat32 && x.dim() == 2, "expects a 2-D float32 CPU tensor");
    auto in = x.contiguous();
    const int64_t rows = in.size(0), cols = in.size(1);
    auto out = torch::empty({rows}, in.options());
    const float* src = in.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        double total = 0.0;
        for (int64_t c = 0; c < cols; ++c) total += src[r * cols + c];
        dst[r] = static_cast<float>(total);
    }
    return out;
}
"""

_ext = load_inline(
    name="cudal1_bundled_l1_4_sum_reduction",
    cpp_sources=_SOURCE,
    functions=["row_sum_forward"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.movedim(self.dim, -1)
        return _ext.row_sum_forward(rows.reshape(-1, rows.shape[-1])).reshape(rows.shape[:-1])
