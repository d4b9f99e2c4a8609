"""Full-size GPU smoke check for the candidates in level1/ (not a candidate; the loader skips it).

Runs each candidate at the task's real sizes against float64 references re-written here from
the task descriptions, with the judge's own comparison (pytest_cudal1.compare), on three input
families (task / normal / wide), and times it against the fp32 reference with CUDA events.
One JSON line per candidate. It is a quick pre-flight, not the judge.

    # on a GPU machine, from this folder (builds the load_inline extensions in parallel first):
    python3 gpu_smoke_check.py --build-all
    python3 gpu_smoke_check.py level1/40_LayerNorm cuda_inline,triton_kernel,cupy_raw,numba_cuda,torch_fast
    # plumbing self-test without a GPU (small shapes; torch_fast and triton_kernel only):
    SMOKE_DEVICE=cpu SMOKE_SMALL=1 TRITON_INTERPRET=1 python3 gpu_smoke_check.py level1/88_MinGPTNewGelu torch_fast,triton_kernel
"""
import glob
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
import traceback

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))
from pytest_cudal1.compare import compare  # noqa: E402  the judge's own comparison

DEV = os.environ.get("SMOKE_DEVICE", "cuda")
SMALL = os.environ.get("SMOKE_SMALL") == "1"

# (full-size shapes, small shapes) of the float inputs
SHAPES = {
    1: ([(4096, 4096), (4096, 4096)], [(70, 70), (70, 70)]),
    6: ([(256, 524288), (524288, 256)], [(20, 5000), (5000, 30)]),
    8: ([(8205, 2949), (2949, 5921)], [(67, 29), (29, 131)]),
    12: ([(4096,), (4096, 4096)], [(37,), (37, 1500)]),
    14: ([(4096, 4096), (4096, 4096)], [(300, 300), (300, 300)]),
    40: ([(16, 64, 256, 256)], [(3, 64, 256, 256)]),
    50: ([(256, 3, 224, 224)], [(1, 3, 224, 224)]),
    85: ([(32, 128, 128, 256)], [(2, 128, 20, 70)]),
    88: ([(8192, 8192)], [(33, 999)]),
    95: ([(32768, 4096)], [(37, 4096)]),
}
INIT = {40: [(64, 256, 256)], 50: [1000], 85: [128, 128, 3, 7, 1, 1, 0, 0, 1, 1, 128]}


def make_inputs(task, family, seed):
    g = torch.Generator(device=DEV).manual_seed(seed)
    shapes = SHAPES[task][1 if SMALL else 0]

    def draw(shape):
        if family == "task":
            return torch.rand(*shape, generator=g, device=DEV)
        y = torch.randn(*shape, generator=g, device=DEV)
        if family == "wide":
            y = y * 100.0 * torch.pow(10.0, torch.rand(*shape, generator=g, device=DEV) * 4 - 2)
        return y

    xs = [draw(s) for s in shapes]
    if task == 14 and family == "task":
        xs = [x.triu() for x in xs]
    if task == 95:
        xs.append(torch.randint(0, shapes[0][1], (shapes[0][0],), generator=g, device=DEV))
    return xs


def reference(task, model, xs):
    if task in (1, 6, 8):
        return xs[0] @ xs[1]
    if task == 12:
        return xs[0].unsqueeze(1) * xs[1]
    if task == 14:
        return torch.triu(xs[0] @ xs[1])
    dt = xs[0].dtype
    if task == 40:
        ln = model.ln
        return F.layer_norm(xs[0], ln.normalized_shape, ln.weight.to(dt), ln.bias.to(dt), ln.eps)
    if task == 50:
        c = model.conv1
        return F.conv2d(xs[0], c.weight.to(dt), c.bias.to(dt), c.stride, c.padding)
    if task == 85:
        c = model.conv2d
        return F.conv2d(xs[0], c.weight.to(dt), None, c.stride, c.padding, c.dilation, groups=c.groups)
    if task == 88:
        x = xs[0]
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
    if task == 95:
        return F.cross_entropy(xs[0], xs[1])
    raise KeyError(task)


def to64(xs):
    return [x.double() if x.is_floating_point() else x for x in xs]


def median_ms(fn, n=10):
    for _ in range(2):
        fn()
    ts = []
    for _ in range(n):
        if DEV == "cuda":
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            ts.append(s.elapsed_time(e))
        else:
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
    return sorted(ts)[len(ts) // 2]


def load(path, tag):
    spec = importlib.util.spec_from_file_location(f"smoke_{tag}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_task(tdir, backends):
    task = int(os.path.basename(os.path.normpath(tdir)).split("_")[0])
    ref_ms = None
    for b in backends:
        rec = {"task": task, "backend": b}
        try:
            t0 = time.time()
            mod = load(os.path.join(tdir, b + ".py"), f"{task}_{b}")
            rec["import_s"] = round(time.time() - t0, 1)
            torch.manual_seed(0)
            model = mod.ModelNew(*INIT.get(task, [])).to(DEV).eval()
            fails = []
            for family, seed in (("task", 0), ("normal", 1), ("wide", 2)):
                xs = make_inputs(task, family, seed)
                with torch.no_grad():
                    got = model(*xs)
                    if DEV == "cuda":
                        torch.cuda.synchronize()
                    native = reference(task, model, xs)
                    expected = reference(task, model, to64(xs))
                bad = compare(got, expected, native)
                if bad is not None:
                    fails.append(f"{family}: {bad.message}")
                del xs, got, native, expected
            rec["correct"] = not fails
            if fails:
                rec["fail"] = fails
            txs = make_inputs(task, "task", 3)
            with torch.no_grad():
                rec["ms"] = round(median_ms(lambda: model(*txs)), 4)
                if ref_ms is None:
                    ref_ms = round(median_ms(lambda: reference(task, model, txs)), 4)
            rec["ref_ms"] = ref_ms
            rec["speedup"] = round(ref_ms / rec["ms"], 3) if rec["ms"] else None
            txs = None  # free the timing inputs before the next backend
        except Exception as exc:  # report and go on with the next backend
            rec["correct"] = False
            rec["error"] = f"{type(exc).__name__}: {str(exc)[:1500]}"
            rec["traceback"] = traceback.format_exc()[-1500:]
        if DEV == "cuda":
            torch.cuda.empty_cache()
        print(json.dumps(rec), flush=True)


def build_all():
    """Import every cuda_inline.py in parallel processes (load_inline compiles at import)."""
    procs = []
    for path in sorted(glob.glob(os.path.join(HERE, "level1", "*", "cuda_inline.py"))):
        code = f"import importlib.util as u; s=u.spec_from_file_location('m', {path!r}); m=u.module_from_spec(s); s.loader.exec_module(m)"
        procs.append((path, subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
    for path, p in procs:
        out = p.communicate()[0].decode(errors="replace")
        print(json.dumps({"build": os.path.relpath(path, HERE), "rc": p.returncode, "log": out[-3000:] if p.returncode else ""}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--build-all":
        build_all()
    else:
        run_task(sys.argv[1], sys.argv[2].split(","))
