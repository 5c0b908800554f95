"""Swish x·sigmoid(x), small (test-only)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


def get_inputs():
    return [torch.randn(4, 100)]


def get_inputs_alt():
    return [torch.randn(3, 37)]


def get_init_inputs():
    return []
