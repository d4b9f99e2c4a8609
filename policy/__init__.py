"""The contrastive-RL policy trainer (exemplars, prompts, LLM backends, GRPO); arrives with its own issue."""
