"""TEMPORARY scratch checker (to be deleted): run every candidate at full size on a GPU against
float64 references written here from the task descriptions (no task sources copied)."""
import glob, importlib.util, json, math, os, subprocess, sys, time, traceback
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))
from pytest_cudal1.compare import compare  # the judge's own comparison

L1 = os.path.join(HERE, "level1")

def rand_inputs(task, fam, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    def R(*s):
        if fam == "task":
            return torch.rand(*s, generator=g, device="cuda")
        y = torch.randn(*s, generator=g, device="cuda", dtype=torch.float32)
        if fam == "wide":
            y = y * 100.0 * torch.pow(10.0, torch.rand(*s, generator=g, device="cuda") * 4 - 2)
        return y
    if task == 1: return [R(4096, 4096), R(4096, 4096)]
    if task == 6: return [R(256, 524288), R(524288, 256)]
    if task == 8: return [R(8205, 2949), R(2949, 5921)]
    if task == 12: return [R(4096), R(4096, 4096)]
    if task == 14:
        a, b = R(4096, 4096), R(4096, 4096)
        return [a.triu(), b.triu()] if fam == "task" else [a, b]
    if task == 40: return [R(16, 64, 256, 256)]
    if task == 50: return [R(256, 3, 224, 224)]
    if task == 85: return [R(32, 128, 128, 256)]
    if task == 88: return [R(8192, 8192)]
    if task == 95: return [R(32768, 4096), torch.randint(0, 4096, (32768,), generator=g, device="cuda")]

INIT = {40: [(64, 256, 256)], 50: [1000], 85: [128, 128, 3, 7, 1, 1, 0, 0, 1, 1, 128]}

def reference(task, m, xs):
    if task in (1, 6, 8): return xs[0] @ xs[1]
    if task == 12: return xs[0].unsqueeze(1) * xs[1]
    if task == 14: return torch.triu(xs[0] @ xs[1])
    if task == 40:
        ln = m.ln
        return F.layer_norm(xs[0], ln.normalized_shape, ln.weight.to(xs[0].dtype), ln.bias.to(xs[0].dtype), ln.eps)
    if task == 50:
        c = m.conv1
        return F.conv2d(xs[0], c.weight.to(xs[0].dtype), c.bias.to(xs[0].dtype), c.stride, c.padding)
    if task == 85:
        c = m.conv2d
        return F.conv2d(xs[0], c.weight.to(xs[0].dtype), None, c.stride, c.padding, c.dilation, groups=c.groups)
    if task == 88:
        x = xs[0]
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
    if task == 95: return F.cross_entropy(xs[0], xs[1])

def to64(xs): return [x.double() if x.is_floating_point() else x for x in xs]

def timeit(fn, n=10):
    for _ in range(2): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        s, e = torch.cuda.Event(True), torch.cuda.Event(True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]

def load(path, i):
    spec = importlib.util.spec_from_file_location(f"cand{i}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

def run_task(tdir, backends):
    task = int(os.path.basename(tdir).split("_")[0])
    results = []
    ref_ms = None
    for i, b in enumerate(backends):
        path = os.path.join(tdir, b + ".py")
        rec = {"task": task, "backend": b}
        try:
            t0 = time.time(); mod = load(path, i); rec["import_s"] = round(time.time() - t0, 1)
            torch.manual_seed(0)
            m = mod.ModelNew(*INIT.get(task, [])).cuda().eval()
            fails = []
            for fam, seed in (("task", 0), ("normal", 1), ("wide", 2)):
                xs = rand_inputs(task, fam, seed)
                with torch.no_grad():
                    got = m(*xs); torch.cuda.synchronize()
                    native = reference(task, m, xs)
                    exp = reference(task, m, to64(xs))
                bad = compare(got, exp, native)
                if bad is not None: fails.append(f"{fam}: {bad.message}")
                del xs, got, native, exp
            rec["correct"] = not fails
            if fails: rec["fail"] = fails
            xs = rand_inputs(task, "task", 3)
            with torch.no_grad():
                rec["ms"] = round(timeit(lambda: m(*xs)), 4)
                if ref_ms is None:
                    ref_ms = round(timeit(lambda: reference(task, m, xs)), 4)
            rec["ref_ms"] = ref_ms
            del xs
        except Exception as exc:
            rec["correct"] = False
            rec["error"] = f"{type(exc).__name__}: {str(exc)[:1500]}"
            rec["tb"] = traceback.format_exc()[-1500:]
        torch.cuda.empty_cache()
        print(json.dumps(rec), flush=True)
        results.append(rec)
    return results

if __name__ == "__main__":
    if sys.argv[1] == "build":   # import one cuda_inline module (compiles it)
        load(sys.argv[2], 0); print("built", sys.argv[2], flush=True); sys.exit(0)
    tdir = sys.argv[1]
    backends = sys.argv[2].split(",")
    run_task(tdir, backends)
