"""Tasks: loaders for the KernelBench format and the bundled task set (tasks/, candidates/).

PYTEST_DONT_REWRITE: no test assertions here (see ``pytest_cudal1/__init__.py`` for why this marker).
"""
