"""A tiny causal LM built in code: random weights, a word-level tokenizer, a chat template.

Tests of anything that drives a model (the ``hf:`` and ``openai:`` backends, the
optimizer loop, the trainer) need a real model folder that loads in a second on
a CPU; none can be downloaded here. ``LlamaConfig`` is used because it keeps a
word-level tokenizer as saved (``Qwen2Config`` silently swaps in its own). With
random weights the answers are word salad over the vocabulary below, so they
mostly fail to parse: that is what such a model does, and what the callers record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

SPECIAL = ["<pad>", "<unk>", "<s>", "</s>", "<user>", "<assistant>", "\n"]
WORDS = [
    "```python", "```", "import", "torch", "torch.nn", "as", "nn", "from", "class", "ModelNew(nn.Module):",
    "Model(nn.Module):", "def", "__init__(self):", "forward(self,", "x):", "super().__init__()", "return",
    "torch.relu(x)", "x", "+", "*", "=", "self", "(", ")", ":", "#", "Performance", "Analysis", "Algorithm",
    "Design", "Code", "Implementation", "the", "a", "kernel", "is", "faster", "fuse", "memory", "CUDA",
    "speedup", "write", "ModelNew", "load_inline", "torch.compile",
]
CHAT_TEMPLATE = (
    "{% for message in messages %}<{{ message['role'] }}> {{ message['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<assistant> {% endif %}"
)


def build_tiny_model(folder: Path, seed: int = 0, heads: int = 4, words: Sequence[str] = WORDS,
                     tied: bool = True, chat: bool = True) -> Path:
    """Save a 2-layer, 64-wide Llama with random weights and a word-level tokenizer into ``folder``.

    ``heads=1`` gives 64-wide heads, a size every vLLM attention kernel takes. A learning test
    wants a small vocabulary (``words``), untied embeddings (a tied tiny model learned nothing in
    30 steps) and the raw prompt (``chat=False``: no chat template).
    """
    import torch
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {word: i for i, word in enumerate([*SPECIAL, *words])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    # Words split at spaces; a newline is a token of its own so code keeps its lines.
    core.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r"[ \t]+"), "removed"),
                                                  pre_tokenizers.Split("\n", "isolated")])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", unk_token="<unk>",
                                        bos_token="<s>", eos_token="</s>")
    if chat:
        tokenizer.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=4096,
                         pad_token_id=vocab["<pad>"], bos_token_id=vocab["<s>"], eos_token_id=vocab["</s>"],
                         tie_word_embeddings=tied)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
