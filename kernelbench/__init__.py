"""Tasks: loaders for the KernelBench format and the bundled task set (tasks/, candidates/)."""
