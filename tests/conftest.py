"""Every test starts from the same global random state, whatever ran before it on its worker: the suite runs on
two pytest-xdist workers, whose order of tests varies between runs, and a tolerance failure must reproduce."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _same_random_state():
    torch.manual_seed(0)
