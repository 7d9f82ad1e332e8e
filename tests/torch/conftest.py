"""pytest setup of the torch_npurt suite: one Python process per VM boot
(`import torch` takes most of a minute under TCG).

Without an NPU the device tests skip, unless NPURT_TORCH_REQUIRE_NPU=1 (as
tests/vm-suites.sh sets it), which makes a missing NPU an error.
"""
import contextlib
import os

import pytest
import torch

import torch_npurt
from torch_npurt import npu

import ipc_child


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


_ipc_helper = None
_ipc_other_user = None  # a helper running as nobody
_ipc_seccomp = None  # a helper whose pidfd_open a seccomp filter refuses
NOBODY = 65534


def pytest_configure(config):
    config.addinivalue_line("markers", "no_npu_ok: runs without an NPU too")
    # test_multiprocessing's other process, forked now: before the suite
    # starts libnpurt (a child forked after cannot use the NPUs) and
    # without a second `import torch` (most of a minute in the VM).
    # As root (the VM), a second one runs as nobody: a receiver that may
    # not take this process's descriptors (as under Yama or seccomp). A
    # third may not even open this process (pidfd_open), as in a container.
    global _ipc_helper, _ipc_other_user, _ipc_seccomp
    if not torch_npurt._C._runtime_started():
        _ipc_helper = ipc_child.Helper()
        _ipc_seccomp = ipc_child.Helper(seccomp=True)
        if os.geteuid() == 0:
            _ipc_other_user = ipc_child.Helper(user=NOBODY)


def pytest_unconfigure(config):
    for helper in (_ipc_helper, _ipc_other_user, _ipc_seccomp):
        if helper is not None:
            helper.stop()


def _helper_fixture(helper, why):
    if helper is None:
        pytest.skip(why)
    yield helper
    # What a failed test left there must not reach the next.
    helper.call(ipc_child.release)


@pytest.fixture
def ipc_helper():
    yield from _helper_fixture(
        _ipc_helper, "libnpurt had started before the helper process could be forked")


@pytest.fixture
def ipc_other_user():
    yield from _helper_fixture(
        _ipc_other_user, "needs root (to run a helper as another user) and a helper forked "
        "before libnpurt started")


@pytest.fixture
def ipc_seccomp():
    yield from _helper_fixture(
        _ipc_seccomp, "libnpurt had started before the helper process could be forked")


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


def sgd_steps(model, device, data, loss_fn, lr):
    """One SGD step per (x, y) of data on device: the losses."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = loss_fn(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def check_masked_encoder(move):
    """An encoder in eval mode over a padded batch (torch 2.x's nested-tensor
    case) gives the CPU's values through `move` (the module or tensor to
    the NPU); padded positions, zeros on the nested path and values on the
    dense one, are not compared. Returns the encoder."""
    torch.manual_seed(0)
    enc = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True), 2).eval()
    x = torch.randn(2, 5, 16)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    with torch.no_grad():
        want = enc(x, src_key_padding_mask=pad)
        got = move(enc)(move(x), src_key_padding_mask=move(pad))
    assert got.device.type == npu._DEVICE_TYPE
    torch.testing.assert_close(got.cpu()[~pad], want[~pad], rtol=1e-4, atol=1e-5)
    return enc


@contextlib.contextmanager
def slow_jobs(us):
    """Every job of NPU 0 takes `us` longer while inside (debugfs, root);
    without the knob the test still runs, with a narrower window."""
    d = npu.get_device_properties(0).debugfs_path
    knob = os.path.join(d, "inject_latency_us") if d else ""
    on = bool(knob) and os.access(knob, os.W_OK)
    if on:
        with open(knob, "w") as f:
            f.write("%d\n" % us)
    try:
        yield
    finally:
        if on:
            with open(knob, "w") as f:
                f.write("0\n")


def queue_slow_writes(x, dev):
    """x := 2 through jobs of both engine classes, chained on the current
    stream, so that its last write lands several job latencies later."""
    spare = torch.empty(1, device=dev)
    x.fill_(0.0)
    x.add_(1.0)
    spare.fill_(0.0)
    x.add_(1.0)
