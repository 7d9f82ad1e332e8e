"""pytest setup of the torch_npurt suite: one Python process per VM boot
(`import torch` takes most of a minute under TCG).

Without an NPU the device tests skip, unless NPURT_TORCH_REQUIRE_NPU=1 (as
tests/vm-suites.sh sets it), which makes a missing NPU an error.
"""
import os

import pytest
import torch

import torch_npurt
from torch_npurt import npu


def pytest_collection_modifyitems(config, items):
    if npu.is_available():
        return
    if os.environ.get("NPURT_TORCH_REQUIRE_NPU") == "1":
        raise pytest.UsageError("NPURT_TORCH_REQUIRE_NPU=1 but no NPU: " +
                                torch_npurt._C._no_device_reason())
    skip = pytest.mark.skip(reason="no NPU (npu.ko not loaded); run through tools/vmrun")
    for item in items:
        if "no_npu_ok" not in item.keywords:
            item.add_marker(skip)


def pytest_configure(config):
    config.addinivalue_line("markers", "no_npu_ok: runs without an NPU too")


@pytest.fixture
def dev():
    return npu.torch_device(0)


@pytest.fixture
def fallbacks():
    """Counts fallback calls made inside the test: fallbacks() -> dict of deltas."""
    before = torch_npurt.fallback_counts()

    def delta():
        now = torch_npurt.fallback_counts()
        return {k: v - before.get(k, 0) for k, v in now.items() if v != before.get(k, 0)}
    return delta


def assert_close(actual, expected, rtol=1e-5, atol=1e-6):
    assert actual.device.type == "cpu"
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
