"""Shared fixtures of the Python suite: fresh random inputs per test, GPU skipping."""

import secrets

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def gen():
    """A generator with a fresh seed each test; the seed is printed so a failure can be replayed."""
    seed = secrets.randbits(63)
    print(f"torch.Generator seed: {seed}")
    return torch.Generator().manual_seed(seed)


@pytest.fixture(autouse=True)
def _default_backend(monkeypatch):
    # Tests choose VSA_BACKEND explicitly; the environment of the run does not leak in.
    monkeypatch.delenv("VSA_BACKEND", raising=False)
