"""trace_decode's labels: a kernel that runs several times per layer gets a row per place in the layer."""

import os
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():  # before anything imports triton (the benchmark imports the engine)
    os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from trace_decode import label_calls  # noqa: E402


def test_places_in_the_layer_and_the_tail():
    layer = ["norm", "linear", "split(int)", "combine", "linear", "norm", "router", "pairs"]
    step = [(n, 0.0, 1.0) for n in layer * 3 + ["norm", "linear", "argmax"]]
    labels = label_calls(step, layers=3)
    assert labels[:8] == ["norm[0]", "linear[0]", "split", "combine", "linear[1]", "norm[1]", "router", "pairs"]
    assert labels[8:16] == labels[:8] and labels[16:24] == labels[:8]
    assert labels[24:] == ["norm[end]", "linear[end]", "argmax"]


def test_kernels_of_fewer_layers_keep_their_name():
    """A hybrid model: attention in one layer of two; the per-layer kernel runs once a layer."""
    step = [(n, 0.0, 1.0) for n in ["delta", "mlp", "attn", "mlp"]]
    assert label_calls(step, layers=2) == ["delta", "mlp", "attn", "mlp"]
