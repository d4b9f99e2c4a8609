"""pytest-cudal1: judge LLM-written GPU kernels honestly, inside pytest.

PYTEST_DONT_REWRITE: the plugin has no test assertions to rewrite. An editable
install imports the package through setuptools' finder, which pytest's rewrite
hook never sees; without this marker every in-process ``pytester`` run then warns
"Module already imported so cannot be rewritten; pytest_cudal1".
"""

__version__ = "0.1.0"
