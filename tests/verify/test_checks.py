"""The correctness arithmetic: input distributions, relative error, trivial-answer detection."""

from __future__ import annotations

import math

import torch

from moelab.verify import checks as C


def test_distributions_keep_shape_dtype_and_sign_and_differ():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 33)
    pos = torch.rand(64, 33)
    ids = torch.randint(0, 8, (64, 2))
    outs = {}
    for d in C.DISTRIBUTIONS:
        y, p, i = C.transform([x, pos, ids], d, g, None, large=100.0)
        assert y.shape == x.shape and y.dtype == x.dtype and torch.isfinite(y).all()
        assert (p >= 0).all(), f"{d}: a non-negative input must stay non-negative"
        assert i is ids, "integer inputs are never touched"
        outs[d] = y
    assert torch.equal(outs["normal"], x)
    assert torch.allclose(outs["large"], x * 100.0)
    assert outs["heavy"].abs().max() / outs["heavy"].std() > outs["uniform"].abs().max() / outs["uniform"].std()
    only_first = C.transform([x, x.clone()], "uniform", g, (0,), 100.0)
    assert not torch.equal(only_first[0], x) and torch.equal(only_first[1], x)


def test_rel_error_edges():
    a = torch.ones(4)
    assert C.rel_error(a, a) == 0.0
    assert math.isclose(C.rel_error(a * 1.5, a), 0.5)
    assert C.rel_error(torch.tensor([1.0, math.nan]), a[:2]) == math.inf
    assert C.rel_error(torch.zeros(3), torch.zeros(3)) == 0.0
    assert C.rel_error(torch.ones(3), torch.zeros(3)) == math.inf


def test_trivial_fit_finds_constants_and_residuals_only():
    xs = [[torch.randn(8, 4)] for _ in range(3)]
    real = [x[0].tanh() for x in xs]
    assert C.trivial_fit(real, xs) is None
    const = [1.0 + 1e-6 * x[0] for x in xs]
    what, spread, _ = C.trivial_fit(const, xs)
    assert what == "a constant" and spread < 1e-5
    resid = [x[0] + 1e-5 * x[0].tanh() for x in xs]
    what, _, ts = C.trivial_fit(resid, xs)
    assert what == "input 0 unchanged" and torch.equal(ts[1], xs[1][0].double())
    assert C.varying_part_error(resid[0], resid[0], ts[0]) == 0.0
    assert math.isclose(C.varying_part_error(ts[0], resid[0], ts[0]), 1.0)
