"""The generation backend interface: prompts in, n completions each out.

The optimizer loop talks only to ``GenerationBackend``: a language model behind
an API (``openai:``), a local model (``hf:``), or the built-in rewrites, which
need no model. Every backend answers in text that goes through the same
``policy.parser`` and the same judge, so the loop has one path. A backend
reports its failures (a timeout, a refused request) per completion in
``error``: a failed generation is a verdict of its round, never a crash of the run.

``make_backend`` turns the policy spec a user writes (``builtin``,
``openai:URL?model=NAME``, ``hf:PATH``, ``vllm:PATH``) into a backend; the model
backends live in their own modules and import their heavy libraries only when built.
"""

from __future__ import annotations

import dataclasses
import importlib
import random
from pathlib import Path
from types import ModuleType
from typing import Protocol, Sequence
from urllib.parse import parse_qs, urlsplit, urlunsplit

from kernelbench.loaders import Task
from policy import builtin


@dataclasses.dataclass(frozen=True)
class SamplingSettings:
    """What a model backend samples with; the built-in backend uses only ``seed``."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 8192
    seed: int | None = None


@dataclasses.dataclass(frozen=True)
class GenerationRequest:
    """One prompt for one task, asking for ``n`` completions.

    ``exemplar_codes`` are the codes the prompt shows (best first), so a backend
    that does not read prompts (the built-in one) can still build on them.
    """

    task: Task
    prompt: str
    prompt_sha256: str
    n: int = 1
    exemplar_codes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Completion:
    """One answer, its token counts (None where the backend has no tokens) and why it ended."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # "stop", "length" (truncated), "error", "exhausted" (the policy has nothing new to propose: no failure)
    finish_reason: str = "stop"
    error: str | None = None


class GenerationBackend(Protocol):
    """``generate`` answers each request with exactly ``request.n`` completions, in request order."""

    name: str

    def generate(self, requests: Sequence[GenerationRequest], settings: SamplingSettings) -> list[list[Completion]]:
        ...


FIRST_REWRITE = builtin.Rewrite(("compile_default",))


class BuiltinBackend:
    """The built-in rewrites as a backend: first-round single steps, then combinations of the exemplars' steps.

    The exemplars a request carries are the best codes so far; their first line
    names their built-in steps (``builtin.steps_of``), and the next proposals are
    unions of those steps not yet shown. Each answer is the rewrite in a fenced
    block, so it is parsed like a model's.
    """

    name = "builtin"

    def __init__(self, steps: Sequence[str] | None = None) -> None:
        # The steps it may use (``builtin?steps=...``): e.g. no max-autotune, whose compile takes minutes a task.
        self.steps = tuple(steps) if steps is not None else tuple(builtin.STEPS)

    def generate(self, requests: Sequence[GenerationRequest], settings: SamplingSettings) -> list[list[Completion]]:
        rng = random.Random(settings.seed)
        return [self._answer(request, rng) for request in requests]

    def _answer(self, request: GenerationRequest, rng: random.Random) -> list[Completion]:
        shown = [builtin.Rewrite(steps) for code in request.exemplar_codes
                 if (steps := builtin.steps_of(code)) is not None and set(steps) <= set(self.steps)]
        # Exemplars come best first: rank them so next_round combines the best; untried single steps follow.
        combos = builtin.next_round({r: float(len(shown) - i) for i, r in enumerate(shown)})
        singles = [r for r in builtin.first_round(request.task)
                   if r.steps[0] in self.steps and r not in shown and r not in combos]
        # torch.compile's default first (the rewrite engineers try first), the other single steps in random order.
        first, rest = [r for r in singles if r == FIRST_REWRITE], [r for r in singles if r != FIRST_REWRITE]
        rng.shuffle(rest)
        proposals = combos + first + rest
        answers = [f"```python\n{builtin.render(request.task, r)}\n```\n" for r in proposals[: request.n]]
        return [Completion(text) for text in answers] + \
            [Completion("", finish_reason="exhausted") for _ in range(request.n - len(answers))]


SPEC_FORMS = """\
  builtin[?steps=STEP,STEP]   (steps: {steps})
  openai:URL?model=NAME[&concurrency=4&timeout=120&retries=3&backoff=1&api_key_env=OPENAI_API_KEY]
  hf:PATH[?device=cpu&dtype=auto]
  vllm:PATH[?tensor_parallel_size=1&gpu_memory_utilization=0.9]""".format(steps=",".join(builtin.STEPS))


def error_completions(n: int, error: str) -> list[Completion]:
    """``n`` failed completions carrying ``error``: how a backend reports a request it could not answer."""
    return [Completion("", finish_reason="error", error=error) for _ in range(n)]


def require(module: str, extra: str) -> ModuleType:
    """Import an optional dependency, or say which extra of this package installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"this backend needs the '{module}' package: pip install 'pytest-cudal1[{extra}]' "
                          f"({exc})") from exc


def _bad_spec(spec: str, why: str) -> ValueError:
    return ValueError(f"bad policy spec {spec!r}: {why}; the forms are:\n{SPEC_FORMS}")


def _options(spec: str, query: str, types: dict[str, type]) -> dict[str, object]:
    """The spec's query keys, each once, each known, each converted to its type."""
    try:
        raw = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as exc:
        raise _bad_spec(spec, f"unreadable query {query!r} ({exc})") from exc
    options: dict[str, object] = {}
    for key, values in raw.items():
        if key not in types:
            raise _bad_spec(spec, f"unknown key {key!r} (known: {', '.join(types)})")
        if len(values) != 1:
            raise _bad_spec(spec, f"key {key!r} given {len(values)} times")
        try:
            options[key] = types[key](values[0])
        except ValueError as exc:
            kind = "an integer" if types[key] is int else "a number"
            raise _bad_spec(spec, f"{key}={values[0]!r} is not {kind}") from exc
    return options


def _builtin_steps(spec: str, query: str) -> tuple[str, ...]:
    named = str(_options(spec, query, {"steps": str}).get("steps", ""))
    steps = tuple(s.strip() for s in named.split(",") if s.strip())
    unknown = [s for s in steps if s not in builtin.STEPS]
    if not steps or unknown:
        raise _bad_spec(spec, f"unknown step {unknown[0]!r}" if unknown else "steps= names no step")
    return steps


def _model_folder(spec: str, location: str) -> str:
    if not location:
        raise _bad_spec(spec, "no model folder")
    if not Path(location).expanduser().is_dir():
        raise _bad_spec(spec, f"no model folder at {location}")
    return str(Path(location).expanduser())


def make_backend(spec: str) -> GenerationBackend:
    """The backend a policy spec names (the forms are in ``SPEC_FORMS``); a bad spec raises ValueError.

    builtin key: ``steps`` (the built-in steps it may propose and combine, comma-separated; default all).

    openai keys: ``model`` (required, the server's model name), ``concurrency``
    (requests in flight at once), ``timeout`` (seconds per request), ``retries``
    (further attempts after a connection error, 429 or 5xx), ``backoff`` (seconds
    before the first retry, doubled each time), ``api_key_env`` (the environment
    variable holding the key; a placeholder is sent when it is unset, for local
    servers). hf keys: ``device`` (``cpu``, ``cuda``, ``cuda:1``; default cuda when
    there is one), ``dtype`` (``auto``, ``float32``, ``bfloat16``, ``float16``). vllm
    keys: ``tensor_parallel_size``, ``gpu_memory_utilization`` (vLLM's own).
    """
    kind, sep, rest = spec.strip().partition(":")
    name, _, query = kind.partition("?")
    if name == "builtin" and not sep:
        return BuiltinBackend(_builtin_steps(spec, query) if query else None)
    if kind == "openai" and sep:
        from policy.openai_backend import OpenAIBackend, OpenAIOptions

        parts = urlsplit(rest)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise _bad_spec(spec, "the URL must start with http:// or https://")
        options = _options(spec, parts.query, OpenAIOptions.KEYS)
        if "model" not in options:
            raise _bad_spec(spec, "openai: needs ?model=NAME")
        url = urlunsplit(parts._replace(query="", fragment=""))
        return OpenAIBackend(OpenAIOptions(url=url, **options))  # type: ignore[arg-type]
    if kind in ("hf", "vllm") and sep:
        location, _, query = rest.partition("?")
        if kind == "hf":
            from policy.hf_backend import HFBackend

            return HFBackend(_model_folder(spec, location),
                             **_options(spec, query, {"device": str, "dtype": str}))  # type: ignore[arg-type]
        from policy.vllm_backend import VLLMBackend

        return VLLMBackend(_model_folder(spec, location), **_options(  # type: ignore[arg-type]
            spec, query, {"tensor_parallel_size": int, "gpu_memory_utilization": float}))
    raise _bad_spec(spec, "unknown form")
