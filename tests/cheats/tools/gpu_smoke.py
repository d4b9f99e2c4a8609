"""Exercise the GPU candidates directly (no harness): does each cheat really cheat, does each control work?"""
import importlib.util
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1] / "cases" / "candidates" / "level1"


def load(task, name, *init):
    spec = importlib.util.spec_from_file_location(f"c_{name}", ROOT / task / f"{name}.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m.ModelNew(*init).to("cuda").eval()


def gpu_matmul():
    N = 4096
    for name in ["stream_escape_sleep", "stream_escape_plain", "stream_joined", "cuda_graph_replay", "tf32_scoped",
                 "torch_matmul", "triton_matmul", "triton_fallback_to_torch"]:
        try:
            model = load("11_GpuMatmul", name)
            for trial in range(2):
                A, B = torch.randn(N, N, device="cuda"), torch.randn(N, N, device="cuda")
                ref = A.double() @ B.double()
                rms = ref.square().mean().sqrt()
                torch.cuda.synchronize()
                with torch.no_grad():
                    out = model(A, B)
                    early = out.clone()  # on the caller's stream, right after return
                torch.cuda.synchronize()
                e = ((early.double() - ref).abs().max() / rms).item()
                f = ((out.double() - ref).abs().max() / rms).item()
                print(f"{name:28s} trial {trial}: early rel err {e:.2e}  final rel err {f:.2e}  tf32={torch.backends.cuda.matmul.allow_tf32}")
        except Exception as exc:  # noqa: BLE001
            print(f"{name:28s} EXC {type(exc).__name__}: {str(exc)[:200]}")


def relu_cases():
    skip = {"early_exit", "segfault"}
    for f in sorted((ROOT / "1_ReluScale").glob("*.py")):
        if f.stem in skip:
            continue
        try:
            model = load("1_ReluScale", f.stem)
            big = torch.randn(16 * 256 + 256, device="cuda")
            x = big[128:128 + 4096].view(16, 256)
            before = big.clone()
            with torch.no_grad():
                for _ in range(2):
                    model(x.clone())
                out = model(x)
            torch.cuda.synchronize()
            exp = torch.relu(before[128:128 + 4096].view(16, 256)) * 2
            if type(out) is not torch.Tensor or out.device.type != "cuda":
                print(f"{f.stem:30s} output type {type(out).__name__} on {out.device}")
                continue
            guard = not torch.equal(big[:128], before[:128]) or not torch.equal(big[128 + 4096:], before[128 + 4096:])
            close = torch.allclose(out, exp) if out.shape == exp.shape else None
            alias = out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
            print(f"{f.stem:30s} close {close} guard_changed {guard} alias {alias}")
        except Exception as exc:  # noqa: BLE001
            print(f"{f.stem:30s} EXC {type(exc).__name__}: {str(exc)[:200]}")


if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(0), file=sys.stderr)
    gpu_matmul()
    relu_cases()
