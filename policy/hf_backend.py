"""The ``hf:`` backend: transformers ``generate`` on a local model folder, in this process.

For small models and for tests (a tiny random model answers in a second on a
CPU); rollouts at scale go through ``vllm:`` or a server. The prompt goes
through the tokenizer's chat template as one user message when it has one,
else as it is.
"""

from __future__ import annotations

from typing import Any, Sequence

from policy.backends import Completion, GenerationRequest, SamplingSettings, error_completions, require


def chat_text(tokenizer: Any, prompt: str) -> str:
    """The text a chat model expects for ``prompt``: its template with one user turn, or the prompt itself."""
    if not getattr(tokenizer, "chat_template", None):
        return prompt
    return tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                         add_generation_prompt=True)


class HFBackend:
    """``n`` sampled sequences per prompt from ``AutoModelForCausalLM``; ``length`` when max_tokens cut one off."""

    def __init__(self, path: str, device: str | None = None, dtype: str = "auto") -> None:
        torch = require("torch", "hf")
        transformers = require("transformers", "hf")
        self.name = f"hf:{path}"
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self._torch = torch
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        self.model = transformers.AutoModelForCausalLM.from_pretrained(
            path, dtype=dtype if dtype == "auto" else getattr(torch, dtype)).to(self.device).eval()

    def generate(self, requests: Sequence[GenerationRequest], settings: SamplingSettings) -> list[list[Completion]]:
        answers = []
        for request in requests:
            try:
                answers.append(self._answer(request, settings) if request.n > 0 else [])
            except (RuntimeError, ValueError) as exc:  # out of memory, a prompt longer than the model takes
                answers.append(error_completions(request.n, f"{self.name}: generation failed ({exc})"))
        return answers

    def _answer(self, request: GenerationRequest, settings: SamplingSettings) -> list[Completion]:
        torch, tokenizer = self._torch, self.tokenizer
        text = chat_text(tokenizer, request.prompt)
        # A chat template writes its own special tokens; a raw prompt gets the tokenizer's.
        inputs = tokenizer(text, return_tensors="pt", add_special_tokens=not getattr(tokenizer, "chat_template", None))
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        if settings.seed is not None:
            torch.manual_seed(settings.seed)
        sampling = settings.temperature > 0
        with torch.no_grad():
            out = self.model.generate(
                **inputs, do_sample=sampling, num_return_sequences=request.n, max_new_tokens=settings.max_tokens,
                pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
                **({"temperature": settings.temperature, "top_p": settings.top_p} if sampling else {}))
        prompt_tokens = inputs["input_ids"].shape[1]
        eos = set(_as_list(self.model.generation_config.eos_token_id) or _as_list(tokenizer.eos_token_id))
        return [self._completion(row[prompt_tokens:].tolist(), prompt_tokens, eos, settings.max_tokens)
                for row in out]

    def _completion(self, new: list[int], prompt_tokens: int, eos: set[int], max_tokens: int) -> Completion:
        """One sequence up to its end-of-sequence token (padding after it is not the answer's)."""
        end = next((i for i, token in enumerate(new) if token in eos), None)
        tokens = new if end is None else new[: end + 1]
        finish = "length" if end is None and len(new) >= max_tokens else "stop"
        return Completion(self.tokenizer.decode(tokens, skip_special_tokens=True), prompt_tokens=prompt_tokens,
                          completion_tokens=len(tokens), finish_reason=finish)


def _as_list(value: int | list[int] | None) -> list[int]:
    return [] if value is None else [value] if isinstance(value, int) else list(value)
