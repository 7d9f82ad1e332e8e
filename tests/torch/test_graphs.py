"""NPUGraph capture and replay (torch.npu.graph), its private memory pool,
make_graphed_callables, and the errors of each call."""
import copy
import threading

import pytest
import torch

from torch_npurt import npu

from conftest import assert_close

N = 1000


def test_capture_and_replay(dev):
    x = torch.zeros(N, device=dev)
    g = npu.NPUGraph()
    with npu.graph(g):
        assert npu.is_current_stream_capturing()
        y = (x * 2 - 1).relu()
        total = y.sum()
    assert not npu.is_current_stream_capturing()
    for i in range(5):
        src = torch.linspace(-3, 3, N) + i
        x.copy_(src.to(dev))
        g.replay()
        assert_close(y.cpu(), (src * 2 - 1).relu(), rtol=1e-5, atol=1e-5)
        assert_close(total.cpu(), (src * 2 - 1).relu().sum(), rtol=1e-4, atol=1e-3)


def test_fork_join_over_three_streams_replayed_1000_times(dev):
    x = torch.zeros(N, device=dev)
    s1, s2 = npu.Stream(), npu.Stream()
    g = npu.NPUGraph()
    with npu.graph(g):
        cs = npu.current_stream()
        s1.wait_stream(cs)
        s2.wait_stream(cs)
        with npu.stream(s1):
            a = x + 1
        with npu.stream(s2):
            b = x * 3
        cs.wait_stream(s1)
        cs.wait_stream(s2)
        out = a + b
    for i in range(1000):
        x.fill_(float(i))
        g.replay()
        if i % 250 == 0 or i == 999:
            assert_close(out.cpu(), torch.full((N,), 4.0 * i + 1))


def test_graph_memory_is_not_reused_by_eager_work(dev):
    x = torch.zeros(N, device=dev)
    g = npu.NPUGraph()
    with npu.graph(g):
        t = x * 2
        y = t + 1
        del t  # freed inside the capture: the graph still writes it
    eager = [torch.full((N,), 7.0, device=dev) for _ in range(8)]
    x.fill_(1.0)
    g.replay()
    assert_close(y.cpu(), torch.full((N,), 3.0))
    for e in eager:
        assert_close(e.cpu(), torch.full((N,), 7.0))


def test_freed_blocks_are_reused_inside_the_capture(dev):
    x = torch.ones(N, device=dev)
    g = npu.NPUGraph()
    with npu.graph(g):
        h = x
        for _ in range(20):
            h = h * 1.5 + 1
    stats = g._pool_stats()
    assert stats["blocks"] <= 4, stats  # 40 temporaries
    x.fill_(2.0)
    g.replay()
    ref = torch.full((N,), 2.0)
    for _ in range(20):
        ref = ref * 1.5 + 1
    assert_close(h.cpu(), ref, rtol=1e-5, atol=1e-2)


def test_record_stream_defers_reuse_to_the_end_of_the_capture(dev):
    side = npu.Stream()
    g = npu.NPUGraph()
    with npu.graph(g):
        cs = npu.current_stream()
        t = torch.ones(N, device=dev)
        p = t.data_ptr()
        del t
        same = torch.ones(N, device=dev)  # same stream: reused at once
        assert same.data_ptr() == p
        side.wait_stream(cs)
        with npu.stream(side):
            twice = same * 2
        same.record_stream(side)
        del same
        cs.wait_stream(side)
        other = torch.ones(N, device=dev)  # the side stream may still read it
        assert other.data_ptr() != p
        out = twice + other
    g.replay()
    assert_close(out.cpu(), torch.full((N,), 3.0))


def test_capture_that_syncs_fails_and_leaves_the_device_usable(dev):
    x = torch.ones(N, device=dev)
    g = npu.NPUGraph()
    with pytest.raises(RuntimeError, match="captur"):
        with npu.graph(g):
            y = x + 1
            y.sum().item()
    assert not npu.is_current_stream_capturing()
    with pytest.raises(RuntimeError, match="nothing captured"):
        g.replay()
    assert_close((x + 1).cpu(), torch.full((N,), 2.0))
    # The graph can be captured again.
    with npu.graph(g):
        y = x + 2
    g.replay()
    assert_close(y.cpu(), torch.full((N,), 3.0))


def test_capture_end_reports_an_invalidated_capture(dev):
    s = npu.Stream()
    g = npu.NPUGraph()
    with npu.stream(s):
        g.capture_begin()
        x = torch.ones(4, device=dev)
        with pytest.raises(RuntimeError):
            npu.synchronize()
        with pytest.raises(RuntimeError, match="(?i)invalidated"):
            g.capture_end()
    del x
    g.reset()


def test_bad_calls(dev):
    g = npu.NPUGraph()
    with pytest.raises(RuntimeError, match="non-default stream"):
        g.capture_begin()
    with pytest.raises(RuntimeError, match="nothing captured"):
        g.replay()
    with pytest.raises(RuntimeError, match="no capture_begin"):
        g.capture_end()
    with pytest.raises(RuntimeError, match="nothing captured"):
        g.debug_dump("/tmp/never.dot")
    with pytest.raises(RuntimeError, match="no pool"):
        g.pool()
    with pytest.raises(ValueError, match="capture_error_mode"):
        g.capture_begin(capture_error_mode="strict")
    with pytest.raises(ValueError, match="pool"):
        g.capture_begin(pool=(1,))
    with pytest.raises(TypeError):
        npu.graph(object())
    s = npu.Stream()
    with npu.stream(s):
        g.capture_begin()
        with pytest.raises(RuntimeError, match="already capturing"):
            g.capture_begin()
        with pytest.warns(UserWarning, match="captured no work"):
            g.capture_end()
        with pytest.raises(RuntimeError, match="reset"):
            g.capture_begin()
    g.replay()  # an empty graph runs nothing
    g.reset()
    g.reset()  # twice is fine


def test_pools_are_shared_between_graphs(dev):
    x = torch.zeros(N, device=dev)
    g1, g2 = npu.NPUGraph(), npu.NPUGraph()
    with npu.graph(g1):
        a = x + 1
    with npu.graph(g2, pool=g1.pool()):
        b = a * 2
    assert g2.pool() == g1.pool()
    x.fill_(3.0)
    g1.replay()
    g2.replay()
    assert_close(b.cpu(), torch.full((N,), 8.0))
    h = npu.graph_pool_handle()
    assert h != npu.graph_pool_handle()
    g3 = npu.NPUGraph()
    with npu.graph(g3, pool=h):
        c = b - 1
    assert g3.pool() == h
    g3.replay()
    assert_close(c.cpu(), torch.full((N,), 7.0))


def test_reset_gives_the_memory_back(dev):
    x = torch.ones(1 << 16, device=dev)
    npu.synchronize()
    before = npu.memory_allocated()
    g = npu.NPUGraph()
    with npu.graph(g):
        t = x * 2
        y = t + 1
        del t
    g.replay()
    assert_close(y.cpu()[:4], torch.full((4,), 3.0))
    assert npu.memory_allocated() > before
    g.reset()
    assert npu.memory_allocated() > before  # y still lives
    del y
    assert npu.memory_allocated() == before


def test_other_threads_allocate_during_a_global_capture(dev):
    x = torch.ones(N, device=dev)
    started, done = threading.Event(), threading.Event()
    errors = []

    def churn():
        try:
            started.wait(timeout=60)
            for _ in range(50):
                t = torch.empty(4096, device=dev)
                del t
        except Exception as e:  # reported below
            errors.append(e)
        finally:
            done.set()

    th = threading.Thread(target=churn)
    th.start()
    g = npu.NPUGraph()
    with npu.graph(g):
        started.set()
        assert done.wait(timeout=120)
        y = x * 5
    th.join()
    assert not errors, errors
    g.replay()
    assert_close(y.cpu(), torch.full((N,), 5.0))


def test_debug_dump(dev, tmp_path):
    x = torch.ones(N, device=dev)
    g = npu.NPUGraph()
    with npu.graph(g):
        y = x + 1
    path = tmp_path / "g.dot"
    g.debug_dump(path)
    assert path.read_text().startswith("digraph")
    del y


def test_make_graphed_callables(dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4)).to(dev)
    ref = copy.deepcopy(model).cpu()
    sample = torch.randn(8, 16).to(dev)
    with pytest.raises(RuntimeError, match="inference"):
        npu.make_graphed_callables(model, (sample,))
    with torch.no_grad():
        graphed = npu.make_graphed_callables(model, (sample,))
        # The module itself, as torch's (m = m.eval() keeps the graph).
        assert graphed is model
        for _ in range(3):
            xin = torch.randn(8, 16)
            out = graphed(xin.to(dev))
            assert_close(out.cpu(), ref(xin), rtol=1e-4, atol=1e-4)
        with pytest.raises(ValueError, match="captured for"):
            graphed(torch.randn(4, 16).to(dev))
        with pytest.raises(TypeError, match="positionally"):
            graphed(input=sample)
        # Another training mode runs the module's own forward.
        xin = torch.randn(4, 16)
        assert graphed.eval() is model
        assert_close(model(xin.to(dev)).cpu(), ref(xin), rtol=1e-4, atol=1e-4)
        model.train()
    with pytest.raises(RuntimeError, match="no_grad"):
        graphed(sample)
    # One module calling another: each is captured with the other's own
    # forward (the forwards change after every capture, as torch's).
    block = torch.nn.Linear(16, 16).to(dev)
    outer = torch.nn.Sequential(block, torch.nn.ReLU()).to(dev)
    ref_outer = copy.deepcopy(outer).cpu()
    with torch.no_grad():
        b2, o2 = npu.make_graphed_callables((block, outer), ((sample,), (sample,)))
        assert b2 is block and o2 is outer
        xin = torch.randn(8, 16)
        assert_close(o2(xin.to(dev)).cpu(), ref_outer(xin), rtol=1e-4, atol=1e-4)
        assert_close(b2(xin.to(dev)).cpu(), ref_outer[0](xin), rtol=1e-4, atol=1e-4)
    # A function is graphed as a callable.
    f = npu.make_graphed_callables(lambda t: t * 2 + 1, (sample,))
    assert_close(f(sample).cpu(), sample.cpu() * 2 + 1)
    assert isinstance(f.graph, npu.NPUGraph)


def test_replay_runs_on_the_capture_device_whatever_is_current():
    if npu.device_count() < 2:
        pytest.skip("needs 2 NPUs")
    npu.set_device(0)
    x = torch.ones(64, device="npu:0")
    g = npu.NPUGraph()
    s = npu.Stream()
    with npu.stream(s):
        g.capture_begin()
        x.mul_(2)
        g.capture_end()
    with npu.device(1):
        g.replay()
        assert npu.current_device() == 1
    npu.synchronize(0)
    assert torch.equal(x.cpu(), torch.full((64,), 2.0))
    g.reset()
