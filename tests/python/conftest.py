"""Shared fixtures: a seeded generator for random test data."""
import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
