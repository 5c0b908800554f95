"""Shipped problems (KernelBench format). Files starting with `_` hold shared code, not problems."""
