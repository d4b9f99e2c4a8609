"""``make_backend``: every spec form, its query keys, and a clear ValueError for each kind of bad spec."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from policy.backends import SPEC_FORMS, BuiltinBackend, make_backend


def test_builtin() -> None:
    assert isinstance(make_backend("builtin"), BuiltinBackend)
    assert make_backend("builtin?steps=cuda_graph,compile_default").steps == ("cuda_graph", "compile_default")


def test_openai_reads_every_key_and_keeps_the_url_path(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    backend = make_backend("openai:https://api.example.com/v1?model=gpt-x&concurrency=8&timeout=30.5"
                           "&retries=5&backoff=0.5&api_key_env=MY_KEY")
    o = backend.options
    assert (o.url, o.model, o.concurrency, o.timeout, o.retries, o.backoff, o.api_key_env) == \
        ("https://api.example.com/v1", "gpt-x", 8, 30.5, 5, 0.5, "MY_KEY")
    d = make_backend("openai:http://127.0.0.1:8000/v1?model=m").options
    assert (d.concurrency, d.timeout, d.retries, d.backoff, d.api_key_env) == (4, 120.0, 3, 1.0, "OPENAI_API_KEY")


@pytest.mark.parametrize("spec, why", [
    ("", "unknown form"),
    ("gpt-4", "unknown form"),
    ("builtin:fast", "unknown form"),
    ("builtin?steps=compile_fast", "unknown step 'compile_fast'"),
    ("builtin?steps=", "steps= names no step"),
    ("builtin?mode=fast", "unknown key 'mode' (known: steps)"),
    ("openai", "unknown form"),
    ("openai:http://127.0.0.1:8000/v1", "needs ?model=NAME"),
    ("openai:127.0.0.1:8000?model=m", "http:// or https://"),
    ("openai:http://h/v1?model=m&temperature=0", "unknown key 'temperature' (known: model, concurrency"),
    ("openai:http://h/v1?model=m&concurrency=lots", "concurrency='lots' is not an integer"),
    ("openai:http://h/v1?model=a&model=b", "key 'model' given 2 times"),
    ("openai:http://h/v1?model", "unreadable query"),
    ("hf:", "no model folder"),
    ("hf:/no/such/model/folder", "no model folder at /no/such/model/folder"),
    ("vllm:/no/such/model/folder", "no model folder at /no/such/model/folder"),
])
def test_bad_specs_say_why_and_list_the_forms(spec: str, why: str) -> None:
    with pytest.raises(ValueError) as err:
        make_backend(spec)
    assert why in str(err.value) and SPEC_FORMS in str(err.value) and repr(spec) in str(err.value)


def test_bad_option_values_are_refused() -> None:
    pytest.importorskip("openai")
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        make_backend("openai:http://h/v1?model=m&concurrency=0")


def test_model_keys_are_checked_before_any_model_loads(tmp_path: Path) -> None:
    for kind, known in (("hf", "device, dtype"), ("vllm", "tensor_parallel_size, gpu_memory_utilization")):
        with pytest.raises(ValueError, match=f"unknown key 'gpus' \\(known: {known}\\)"):
            make_backend(f"{kind}:{tmp_path}?gpus=2")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_vllm_without_vllm_names_the_extra(tmp_path: Path) -> None:
    with pytest.raises(ImportError, match=r"pip install 'pytest-cudal1\[vllm\]'"):
        make_backend(f"vllm:{tmp_path}?tensor_parallel_size=1")
