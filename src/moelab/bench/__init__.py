"""Benchmarks that the `moelab bench` command runs: baselines and moelab side by side, in one process."""
