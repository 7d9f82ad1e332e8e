"""Sparse COO tensors on the NPU: indices and values live on the device;
the structure is ATen's own code, every other op runs on the CPU through
the sparse fallback and gives the CPU's results, on the NPU."""
import copy
import io

import pytest
import torch

import torch_npurt

from conftest import assert_close

INDICES = [[0, 1, 1], [2, 0, 2]]
VALUES = [3.0, 4.0, 5.0]


def cpu_sparse():
    return torch.sparse_coo_tensor(torch.tensor(INDICES), torch.tensor(VALUES), (2, 3))


def on_npu(t, dev):
    return t.device.type == dev.type


def test_construct_on_the_device(dev):
    s = torch.sparse_coo_tensor(torch.tensor(INDICES), torch.tensor(VALUES), (2, 3), device=dev)
    assert s.is_sparse and on_npu(s, dev)
    assert on_npu(s._indices(), dev) and on_npu(s._values(), dev)
    assert (s._nnz(), s.sparse_dim(), s.dense_dim()) == (3, 2, 0)
    assert s.to_dense().cpu().tolist() == [[0.0, 0.0, 3.0], [4.0, 0.0, 5.0]]
    # From NPU indices and values, the device inferred.
    t = torch.sparse_coo_tensor(torch.tensor(INDICES, device=dev),
                                torch.tensor(VALUES, device=dev), (2, 3))
    assert on_npu(t, dev) and torch.equal(t.to_dense().cpu(), s.to_dense().cpu())
    assert "nnz=3" in str(t) and "layout=torch.sparse_coo" in str(t)
    # device="npu" (on torch 1.13 too, where the package translates it).
    u = torch.sparse_coo_tensor(torch.tensor(INDICES), torch.tensor(VALUES), (2, 3), device="npu")
    assert on_npu(u, dev) and torch.equal(u.to_dense().cpu(), s.to_dense().cpu())


def test_between_host_and_device(dev):
    s = cpu_sparse().to(dev)
    assert s.is_sparse and on_npu(s, dev)
    back = s.cpu()
    assert back.is_sparse and back.device.type == "cpu"
    assert torch.equal(back.to_dense(), cpu_sparse().to_dense())
    d = torch.tensor([[0.0, 2.0, 0.0], [1.0, 0.0, 0.0]])
    sp = d.to(dev).to_sparse()
    assert sp.is_sparse and on_npu(sp, dev) and sp._nnz() == 2
    assert torch.equal(sp.to_dense().cpu(), d)
    # The coalesced flag travels both ways.
    c = cpu_sparse().coalesce()
    assert c.to(dev).is_coalesced() and c.to(dev).cpu().is_coalesced()
    u = torch.sparse_coo_tensor(torch.tensor([[0, 0]]), torch.tensor([1.0, 2.0]), (2,))
    assert not u.to(dev).is_coalesced()


def test_coalesce_sums_duplicates(dev):
    s = torch.sparse_coo_tensor(torch.tensor([[0, 0, 1], [1, 1, 0]]),
                                torch.tensor([1.0, 2.0, 3.0]), (2, 2), device=dev)
    assert not s.is_coalesced()
    c = s.coalesce()
    assert c.is_coalesced() and c._nnz() == 2 and on_npu(c, dev)
    assert c.to_dense().cpu().tolist() == [[0.0, 3.0], [3.0, 0.0]]


def test_arithmetic_matches_the_cpu(dev):
    s, sc = cpu_sparse().to(dev), cpu_sparse()
    for got, want in ((s + s, sc + sc), (s * 2, sc * 2), (s - s * 0.5, sc - sc * 0.5)):
        assert got.is_sparse and on_npu(got, dev)
        assert_close(got.to_dense().cpu(), want.to_dense())
    d = torch.randn(3, 4)
    for got, want in ((torch.sparse.mm(s, d.to(dev)), torch.sparse.mm(sc, d)),
                      (s @ d.to(dev), sc @ d),
                      (torch.addmm(torch.ones(2, 4, device=dev), s, d.to(dev)),
                       torch.addmm(torch.ones(2, 4), sc, d))):
        assert not got.is_sparse and on_npu(got, dev)
        assert_close(got.cpu(), want)
    x = torch.zeros(2, 3, device=dev)
    x.add_(s)
    assert torch.equal(x.cpu(), sc.to_dense())
    assert torch.sparse.sum(s).item() == 12.0


def test_in_place_ops_keep_the_tensor(dev):
    s = cpu_sparse().to(dev)
    same = s.mul_(2)
    assert same is s and on_npu(s, dev) and on_npu(s._values(), dev)
    assert torch.equal(s.to_dense().cpu(), (cpu_sparse() * 2).to_dense())
    s.add_(cpu_sparse().to(dev))
    assert torch.equal(s.to_dense().cpu(), (cpu_sparse() * 3).to_dense())
    s.zero_()
    assert s._nnz() == 0 and on_npu(s, dev) and s.shape == (2, 3)
    t = torch.sparse_coo_tensor(size=(4, 5), device=dev)
    t.copy_(cpu_sparse().to(dev))
    assert t.shape == (2, 3) and torch.equal(t.to_dense().cpu(), cpu_sparse().to_dense())


def test_hybrid_tensors(dev):
    i, v = torch.tensor([[0, 2]]), torch.randn(2, 4)
    s = torch.sparse_coo_tensor(i, v, (3, 4), device=dev)
    assert (s.sparse_dim(), s.dense_dim()) == (1, 1)
    assert_close(s.to_dense().cpu(), torch.sparse_coo_tensor(i, v, (3, 4)).to_dense())
    assert_close((s * 3).coalesce().values().cpu(), v * 3)


def test_gradients(dev):
    d = torch.randn(3, 2)
    s = cpu_sparse().to(dev).requires_grad_()
    dn = d.to(dev).requires_grad_()
    torch.sparse.mm(s, dn).sum().backward()
    sc, dc = cpu_sparse().requires_grad_(), d.clone().requires_grad_()
    torch.sparse.mm(sc, dc).sum().backward()
    assert on_npu(dn.grad, dev) and on_npu(s.grad, dev) and s.grad.is_sparse
    assert_close(dn.grad.cpu(), dc.grad)
    assert_close(s.grad.to_dense().cpu(), sc.grad.to_dense())


@pytest.mark.parametrize("optimizer", ["SGD", "SparseAdam", "Adagrad"])
@pytest.mark.parametrize("module", ["Embedding", "EmbeddingBag"])
def test_sparse_embedding_trains(dev, optimizer, module):
    """nn.Embedding(sparse=True) and EmbeddingBag: their gradients are
    sparse NPU tensors and the optimizers that take them step as on the
    CPU."""
    torch.manual_seed(0)
    ref = getattr(torch.nn, module)(10, 3, sparse=True)
    emb = getattr(torch.nn, module)(10, 3, sparse=True)
    emb.load_state_dict(ref.state_dict())
    emb.to(dev)
    idx = torch.tensor([[1, 2], [1, 7]])
    for model, ix in ((ref, idx), (emb, idx.to(dev))):
        opt = getattr(torch.optim, optimizer)(model.parameters(), lr=0.5)
        for _ in range(3):
            opt.zero_grad()
            (model(ix) ** 2).sum().backward()
            opt.step()
    assert emb.weight.grad.is_sparse and on_npu(emb.weight.grad, dev)
    assert on_npu(emb.weight, dev)
    assert_close(emb.weight.detach().cpu(), ref.weight.detach(), rtol=1e-5, atol=1e-6)


def test_legacy_new(dev):
    s = cpu_sparse().to(dev)
    t = s.new(torch.tensor(INDICES, device=dev), torch.tensor(VALUES, device=dev), (2, 3))
    assert t.is_sparse and on_npu(t, dev) and t.dtype == s.dtype
    assert torch.equal(t.to_dense().cpu(), cpu_sparse().to_dense())
    e = s.new(4, 5)
    assert e.is_sparse and on_npu(e, dev) and e.shape == (4, 5) and e._nnz() == 0


def test_deepcopy(dev):
    s = cpu_sparse().to(dev)
    c = copy.deepcopy(s)
    assert c is not s and c.is_sparse and on_npu(c, dev)
    s.mul_(0)
    assert torch.equal(c.to_dense().cpu(), cpu_sparse().to_dense())


def test_save_and_load(dev):
    buf = io.BytesIO()
    torch.save(cpu_sparse().to(dev), buf)
    buf.seek(0)
    t = torch.load(buf)
    assert t.is_sparse and on_npu(t, dev)
    assert torch.equal(t.to_dense().cpu(), cpu_sparse().to_dense())


def test_errors_name_the_npu(dev):
    s = cpu_sparse().to(dev)
    with pytest.raises(RuntimeError, match="copy_\\(\\) between dense and sparse Tensors"):
        torch.zeros(2, 3, device=dev).copy_(s)
    # An op sparse tensors do not have on any device: torch's error, for
    # the NPU's sparse key rather than the CPU's the op was tried on.
    with pytest.raises(NotImplementedError, match="'Sparse(PrivateUse1|npu)' backend") as e:
        s.view(6)
    assert "SparseCPU" not in str(e.value)
    with pytest.raises(RuntimeError, match="sparse_dim"):
        torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.tensor([1.0, 2.0]), (2, 2),
                                device=dev).sparse_resize_((2,), 2, 1)
    # The device still works.
    assert (s * 1).to_dense().cpu().sum().item() == 12.0


def test_fallback_is_counted(dev, fallbacks):
    (cpu_sparse().to(dev) * 2).coalesce()
    seen = fallbacks()
    assert any("mul" in k for k in seen) and any("_coalesce" in k for k in seen), seen
    assert torch_npurt.fallback_counts()
