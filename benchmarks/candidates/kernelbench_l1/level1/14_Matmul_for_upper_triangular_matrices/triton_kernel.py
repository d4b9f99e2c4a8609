"""C = triu(A @ B); tiles strictly below the diagonal are skipped: Triton tiled matmul with FP32 accumulation.

tl.dot with input_precision="ieee" (true FP32 FMA, no TF32), 128x128x16 tiles, grouped
program order for L2 reuse, masked edges; split-K into a partial buffer plus a fixed-order
Triton reduction when the output has too few tiles to fill the GPU. Output tiles strictly below the diagonal skip the k loop and are written as
zeros; diagonal tiles mask i > j.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, k_chunk,
               stride_am, stride_ak, stride_bk, stride_bn,
               TRIU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    pid_z = tl.program_id(1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    k_start = pid_z * k_chunk
    k_end = tl.minimum(K, k_start + k_chunk)
    if TRIU:
        # a tile strictly below the diagonal is all zeros: skip its k loop
        k_end = tl.where(pid_m * BLOCK_M > pid_n * BLOCK_N + BLOCK_N - 1, k_start, k_end)
    mask_m = offs_m[:, None] < M
    mask_n = offs_n[None, :] < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_start, k_end, BLOCK_K):
        kk = k + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=mask_m & (kk[None, :] < k_end), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(kk[:, None] < k_end) & mask_n, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    if TRIU:
        acc = tl.where(offs_m[:, None] > offs_n[None, :], 0.0, acc)
    c_ptrs = c_ptr + pid_z * M * N + offs_m[:, None] * N + offs_n[None, :]
    tl.store(c_ptrs, acc, mask=mask_m & mask_n)


@triton.jit
def _splitk_reduce(ws_ptr, out_ptr, MN, S, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for z in range(0, S):
        acc += tl.load(ws_ptr + z * MN + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, acc, mask=mask)


_BM, _BN, _BK, _GROUP_M = 128, 128, 16, 8


def _matmul(A: torch.Tensor, B: torch.Tensor, triu: bool) -> torch.Tensor:
    A = A.contiguous()
    B = B.contiguous()
    M, K = A.shape
    N = B.shape[1]
    C = torch.empty((M, N), device=A.device, dtype=torch.float32)
    if M == 0 or N == 0:
        return C
    tiles = triton.cdiv(M, _BM) * triton.cdiv(N, _BN)
    sms = torch.cuda.get_device_properties(A.device).multi_processor_count if A.is_cuda else 1
    S, k_chunk = 1, max(K, 1)
    if tiles < 2 * sms and K >= 4096:
        S = min(triton.cdiv(K, 1024), triton.cdiv(4 * sms, tiles))
        k_chunk = triton.cdiv(triton.cdiv(K, S), _BK) * _BK
        S = triton.cdiv(K, k_chunk)
    dst = C if S == 1 else torch.empty((S, M, N), device=A.device, dtype=torch.float32)
    _mm_kernel[(tiles, S)](A, B, dst, M, N, K, k_chunk,
                           A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                           TRIU=triu, BLOCK_M=_BM, BLOCK_N=_BN, BLOCK_K=_BK, GROUP_M=_GROUP_M,
                           num_warps=8, num_stages=3)
    if S > 1:
        RB = 1024
        _splitk_reduce[(triton.cdiv(M * N, RB),)](dst, C, M * N, S, BLOCK=RB, num_warps=4)
    return C


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _matmul(A, B, True)
