"""The ``openai:`` backend: any OpenAI-compatible chat server through the official client.

vLLM, SGLang, ``transformers serve`` and hosted APIs all speak chat completions,
so one client covers them. What differs is handled here: a server that ignores
``n`` (``transformers serve`` answers one choice) gets further requests until
each prompt has its n answers; a failing server is retried with exponential
backoff, then every answer it owed carries an error naming the URL and the
cause, so the loop records the round as failed and goes on.
"""

from __future__ import annotations

import dataclasses
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, Sequence

from policy.backends import Completion, GenerationRequest, SamplingSettings, error_completions, require

PLACEHOLDER_KEY = "no-key"  # sent when the key's variable is unset: local servers want some key, any key


@dataclasses.dataclass(frozen=True)
class OpenAIOptions:
    """The spec's query keys (documented in ``policy.backends.make_backend``)."""

    KEYS: ClassVar[dict[str, type]] = {"model": str, "concurrency": int, "timeout": float, "retries": int,
                                       "backoff": float, "api_key_env": str}

    url: str
    model: str
    concurrency: int = 4
    timeout: float = 120.0
    retries: int = 3
    backoff: float = 1.0
    api_key_env: str = "OPENAI_API_KEY"

    def __post_init__(self) -> None:
        if self.concurrency < 1 or self.timeout <= 0 or self.retries < 0 or self.backoff < 0:
            raise ValueError(f"openai:{self.url}: concurrency must be >= 1, timeout > 0, retries and backoff >= 0 "
                             f"(got {self.concurrency}, {self.timeout}, {self.retries}, {self.backoff})")


class _Failed(Exception):
    """A call that gave no answer after its retries; the message names the URL and the cause."""


def _cause(exc: BaseException) -> str:
    """What went wrong, in words: the HTTP status and body, or the connection error under the client's."""
    status = getattr(exc, "status_code", None)
    if status is not None:
        return f"HTTP {status}: {getattr(exc, 'message', exc)}"
    inner = exc.__cause__ or exc.__context__
    return f"{type(exc).__name__}: {exc}" + (f" ({type(inner).__name__}: {inner})" if inner else "")


def _split(total: int | None, parts: int) -> list[int | None]:
    """A call's completion tokens shared among its choices (exact when it has one)."""
    if total is None:
        return [None] * parts
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


class OpenAIBackend:
    """Chat completions with the prompt as one user message; at most ``concurrency`` requests in flight."""

    def __init__(self, options: OpenAIOptions) -> None:
        self._openai = require("openai", "llm")
        self.options = options
        self.name = f"openai:{options.url}?model={options.model}"
        api_key = os.environ.get(options.api_key_env) or PLACEHOLDER_KEY
        # The client's own retries are off: ours back off as configured and end in one message per call.
        self._client = self._openai.OpenAI(base_url=options.url, api_key=api_key, timeout=options.timeout,
                                           max_retries=0)

    def generate(self, requests: Sequence[GenerationRequest], settings: SamplingSettings) -> list[list[Completion]]:
        answers: list[list[Completion]] = [[] for _ in requests]
        calls_made = [0] * len(requests)
        asks = [(i, r.n) for i, r in enumerate(requests) if r.n > 0]
        with ThreadPoolExecutor(max_workers=self.options.concurrency) as pool:
            while asks:
                futures = []
                for i, n in asks:
                    seed = None if settings.seed is None else settings.seed + calls_made[i]
                    calls_made[i] += 1
                    futures.append((i, pool.submit(self._complete, requests[i].prompt, n, settings, seed)))
                most = [0] * len(requests)  # the most choices one call gave, per request: the server's n
                for i, future in futures:
                    got = future.result()
                    answers[i] += got
                    most[i] = max(most[i], len(got))
                asks = [(i, min(most[i], missing - start))
                        for i, r in enumerate(requests) if (missing := r.n - len(answers[i])) > 0
                        for start in range(0, missing, most[i])]
        return [a[: r.n] for a, r in zip(answers, requests)]

    def _complete(self, prompt: str, n: int, settings: SamplingSettings, seed: int | None) -> list[Completion]:
        """One call's answers (at least one), or ``n`` errors when the server gave none."""
        try:
            response = self._create(prompt, n, settings, seed)
            choices = list(response.choices or [])
            if not choices:
                raise _Failed(f"{self.options.url}: the server answered with no choices")
            usage = response.usage
            tokens = _split(usage.completion_tokens if usage else None, len(choices))
            return [Completion(text=(choice.message.content or "") if choice.message else "",
                               prompt_tokens=usage.prompt_tokens if usage else None,
                               completion_tokens=count,
                               finish_reason="length" if choice.finish_reason == "length" else "stop")
                    for choice, count in zip(choices, tokens)]
        except _Failed as failure:
            return error_completions(n, str(failure))
        except (AttributeError, TypeError, ValueError) as exc:  # a body that is not a chat completion
            return error_completions(n, f"{self.options.url}: unreadable response ({_cause(exc)})")

    def _create(self, prompt: str, n: int, settings: SamplingSettings, seed: int | None) -> Any:
        """The chat completion, retried with exponential backoff on connection errors, 429 and 5xx."""
        openai = self._openai
        retried = (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)
        extra: dict[str, Any] = {} if seed is None else {"seed": seed}
        attempts = self.options.retries + 1
        for attempt in range(attempts):
            try:
                return self._client.chat.completions.create(
                    model=self.options.model, messages=[{"role": "user", "content": prompt}], n=n,
                    temperature=settings.temperature, top_p=settings.top_p, max_tokens=settings.max_tokens, **extra)
            except retried as exc:
                cause = _cause(exc)
                if attempt + 1 < attempts:
                    time.sleep(self.options.backoff * 2 ** attempt)
            except openai.OpenAIError as exc:
                raise _Failed(f"{self.options.url}: {_cause(exc)} (not retried)") from exc
        raise _Failed(f"{self.options.url}: {cause}, after {attempts} attempt(s)")
