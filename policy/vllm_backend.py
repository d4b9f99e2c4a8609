"""The ``vllm:`` backend: an in-process ``vllm.LLM`` for rollouts on a GPU machine.

vLLM batches all prompts of a round in one ``generate`` call and samples ``n``
per prompt itself (``SamplingParams(n=...)``). It has no CPU build: it is the
optional extra ``[vllm]``, imported only when this backend is built, and it was
not run where this was written (its test skips without vLLM).
"""

from __future__ import annotations

from typing import Any, Sequence

from policy.backends import Completion, GenerationRequest, SamplingSettings, error_completions, require
from policy.hf_backend import chat_text


class VLLMBackend:
    """One ``LLM.generate`` per round, one ``SamplingParams`` per request."""

    def __init__(self, path: str, tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.9) -> None:
        self._vllm = require("vllm", "vllm")
        self.name = f"vllm:{path}"
        self.llm = self._vllm.LLM(model=path, tensor_parallel_size=tensor_parallel_size,
                                  gpu_memory_utilization=gpu_memory_utilization)

    def generate(self, requests: Sequence[GenerationRequest], settings: SamplingSettings) -> list[list[Completion]]:
        asked = [r for r in requests if r.n > 0]
        if not asked:
            return [[] for _ in requests]
        tokenizer = self.llm.get_tokenizer()
        params = [self._vllm.SamplingParams(n=r.n, temperature=settings.temperature, top_p=settings.top_p,
                                            max_tokens=settings.max_tokens, seed=settings.seed) for r in asked]
        try:
            outputs = self.llm.generate([chat_text(tokenizer, r.prompt) for r in asked], params, use_tqdm=False)
        except (RuntimeError, ValueError) as exc:  # out of memory, a prompt longer than the model takes
            failed = f"{self.name}: generation failed ({exc})"
            return [error_completions(r.n, failed) for r in requests]
        by_request = iter(outputs)
        return [self._completions(next(by_request)) if r.n > 0 else [] for r in requests]

    def _completions(self, output: Any) -> list[Completion]:
        """A ``RequestOutput``'s ``CompletionOutput``s; vLLM says ``length`` itself when max_tokens cut one off."""
        prompt_tokens = len(output.prompt_token_ids or [])
        return [Completion(o.text, prompt_tokens=prompt_tokens, completion_tokens=len(o.token_ids),
                           finish_reason=o.finish_reason if o.finish_reason in ("stop", "length") else "error",
                           error=None if o.finish_reason in ("stop", "length")
                           else f"{self.name}: generation ended with {o.finish_reason!r}")
                for o in output.outputs]
