"""pytest-cudal1: judge LLM-written GPU kernels honestly, inside pytest."""

__version__ = "0.1.0"
