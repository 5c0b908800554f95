"""Benchmarks that the `moelab bench` command runs: baselines and moelab side by side, in one process."""

from __future__ import annotations


def floor_read_gbps(arg: float | None = None) -> tuple[float, str]:
    """GB/s for a benchmark's floor and where it came from: `arg` if given, else this GPU's measured ceiling,
    else the named datasheet fallback 4300 GB/s — said aloud, so a floor is never silently invented."""
    if arg is not None:
        return arg, "--read-gbps"
    from moelab import hardware

    try:
        c = hardware.ceilings()
        return c.read_gbps, f"hardware.ceilings(): {c.source}"
    except Exception as e:  # no GPU or a failed probe: the floor must still be stated, with its source
        print(f"hardware.ceilings() unavailable ({type(e).__name__}: {e}); the floor uses 4300 GB/s")
        return 4300.0, "default 4300 GB/s"
