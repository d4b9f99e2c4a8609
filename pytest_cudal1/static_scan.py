"""An AST scan of candidate source for patterns that often go with cheating.

Findings are warnings in the record and the report, never a rejection on their
own: honest code uses streams, threads and CUDA graphs too, and the runtime
checks are what decide. Names follow KernelGuard's rule families where one fits.
"""

from __future__ import annotations

import ast
from typing import Any

SUSPICIOUS_MODULES = {
    "threading": "THREAD_INJECTION", "concurrent": "THREAD_INJECTION", "multiprocessing": "THREAD_INJECTION",
    "subprocess": "SANDBOX_ESCAPE", "ctypes": "NATIVE_TAMPERING", "gc": "FRAME_OR_GC_ACCESS",
    "inspect": "FRAME_OR_GC_ACCESS", "importlib": "MODULE_RELOAD", "base64": "OBFUSCATED_EXEC",
    "socket": "SANDBOX_ESCAPE", "urllib": "SANDBOX_ESCAPE", "pytest_cudal1": "HARNESS_ACCESS",
}
SUSPICIOUS_CALLS = {
    "Stream": "SIDE_STREAM", "stream": "SIDE_STREAM", "cudaStreamCreate": "SIDE_STREAM",
    "_getframe": "FRAME_OR_GC_ACCESS", "get_objects": "FRAME_OR_GC_ACCESS",
    "exec": "OBFUSCATED_EXEC", "eval": "OBFUSCATED_EXEC", "compile": "OBFUSCATED_EXEC",
    "system": "SANDBOX_ESCAPE", "_exit": "EARLY_EXIT", "exit": "EARLY_EXIT",
    "set_float32_matmul_precision": "PRECISION_DOWNGRADE", "half": "PRECISION_DOWNGRADE",
    "bfloat16": "PRECISION_DOWNGRADE", "set_num_threads": "GLOBAL_STATE",
    "CUDAGraph": "CUDA_GRAPH", "graph": "CUDA_GRAPH",
    "_make_subclass": "LAZY_TENSOR", "data_ptr": "POINTER_KEYED", "empty_like": "UNINITIALIZED_ALLOC",
}
SOURCE_STRINGS = {"cudaStreamCreate": "SIDE_STREAM", "cudaLimitPersistingL2CacheSize": "L2_PERSISTENCE",
                  "accessPolicyWindow": "L2_PERSISTENCE", "std::thread": "THREAD_INJECTION"}


def scan(source: str) -> list[dict[str, Any]]:
    """Findings as ``{"rule", "line", "text"}``, at most one per rule and line."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = source.splitlines()
    found: dict[tuple[str, int], dict[str, Any]] = {}

    def add(rule: str, node: ast.AST) -> None:
        line = getattr(node, "lineno", 0)
        text = lines[line - 1].strip()[:120] if 0 < line <= len(lines) else ""
        found.setdefault((rule, line), {"rule": rule, "line": line, "text": text})

    imported = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                rule = SUSPICIOUS_MODULES.get(name.split(".")[0])
                if rule:
                    add(rule, node)
        elif isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name == "compile" and isinstance(fn, ast.Attribute) and ast.unparse(fn.value) == "torch":
                add("TORCH_COMPILE", node)
            elif name in SUSPICIOUS_CALLS:
                add(SUSPICIOUS_CALLS[name], node)
            if name == "__torch_function__":
                add("LAZY_TENSOR", node)
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                root = _root_name(t)
                if isinstance(t, ast.Attribute) and root in imported:  # assigning into an imported module
                    add("GLOBAL_STATE" if "backends" in ast.unparse(t) else "MONKEYPATCH", node)
                if isinstance(t, ast.Subscript) and ast.unparse(t.value) == "os.environ":
                    add("GLOBAL_STATE", node)
        elif isinstance(node, ast.FunctionDef) and node.name == "__torch_function__":
            add("LAZY_TENSOR", node)
    for needle, rule in SOURCE_STRINGS.items():
        for i, line in enumerate(lines, 1):
            if needle in line:
                found.setdefault((rule, i), {"rule": rule, "line": i, "text": line.strip()[:120]})
    return sorted(found.values(), key=lambda f: (f["line"], f["rule"]))


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None
