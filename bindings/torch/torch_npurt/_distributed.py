"""torch.distributed on NPU tensors: the ``hccl`` backend (torch_npu's name).

``init_process_group("hccl")`` (or ``backend=None`` on torch >= 2.2, which
picks it for NPU tensors) gives a process group whose collectives take NPU
and CPU tensors, so ``DistributedDataParallel``, ``all_reduce``,
``all_gather_into_tensor``, ``send``/``recv`` and the object collectives run
as they do with NCCL on CUDA.

The transport is gloo's (TCP; ``GLOO_SOCKET_IFNAME`` as for gloo), over
host memory: an NPU operand is copied to the host on the current stream
(which orders it after the work queued there, as NCCL's stream does), the
host collective runs, and the results are copied back on the current
stream. gloo does the same with CUDA tensors. A collective returns once it
is complete: ``async_op=True`` gives a finished work, whose future holds
the NPU tensors. There is no device-to-device transport (the NPUs of one
host could share memory through libnpurt's IPC; not done).

Reductions: gloo's (SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR) and AVG
(NCCL's, for floating types: a SUM divided by the group's size); float16
and bfloat16 are reduced in float32 on the host, bool as NCCL does (SUM is
an or). PREMUL_SUM, a reduce-scatter of unequal parts and a wait() with a
timeout on a collective's work (torch's future-backed work has none) are
refused with a RuntimeError.
"""

import functools
import inspect

import torch
import torch.distributed as dist

from . import npu
from ._patches import _cuda_is_available

BACKEND = "hccl"

# ProcessGroup and Work are Python-subclassable through their pybind
# trampolines (torch 1.13 and 2.x alike); a process group made by a
# backend's creator that is a ProcessGroup is used as the group itself.
_c10d = torch._C._distributed_c10d
_ProcessGroup = _c10d.ProcessGroup
_Work = _c10d.Work


def _is_npu(t):
    return t.device.type == npu._DEVICE_TYPE


def _npu_devices(tensors):
    return sorted({t.device for t in tensors if _is_npu(t)}, key=lambda d: d.index)


def _flat(values):
    """The tensors of an argument: a tensor, a list, or a list of lists."""
    if isinstance(values, torch.Tensor):
        return [values]
    out = []
    for v in values:
        out.extend(_flat(v))
    return out


def _completed_future(result):
    """A future holding ``result``; with NPU tensors it carries their
    devices, so a wait orders the waiter's streams after the copies back."""
    devices = _npu_devices(_flat(result))
    fut = torch.futures.Future(devices=devices) if devices else torch.futures.Future()
    fut.set_result(result)
    return fut


def _finished(result):
    """The work of a collective that is complete: a C++ work over a
    completed future. Not a Python Work: C++ callers (DDP's reducer, its
    parameter checks) keep the work after Python let go of it, and pybind's
    trampoline then has no Python object to call, so the base class's
    wait() would wait forever."""
    return _c10d._create_work_from_future(_completed_future(result))


class _Pending(_Work):
    """A send or receive under way: gloo's work, whose staged result wait()
    copies back. Point-to-point operations must not complete in the call:
    two ranks that each isend() a large tensor before their irecv() would
    wait for each other. Only Python calls them (dist.send/recv/isend/irecv,
    batch_isend_irecv), which hold the work they wait on."""

    def __init__(self, work, stage, result, source_rank=-1):
        super().__init__()
        self._work = work
        self._stage = stage
        self._result = result
        self._source = source_rank
        self._future = None

    def wait(self, timeout=None):
        if self._work is not None:
            if timeout is None:
                self._work.wait()
            else:
                self._work.wait(timeout)
            self._stage.finish()
            if self._source < 0:
                self._source = self._work._source_rank()
            self._work = None
        return True

    def is_completed(self):
        if self._work is not None and self._work.is_completed():
            self.wait()
        return self._work is None

    def is_success(self):
        return self.is_completed()

    def exception(self):
        return None

    def result(self):
        self.wait()
        return self._result

    def synchronize(self):
        self.wait()

    def get_future(self):
        self.wait()
        if self._future is None:
            self._future = _completed_future(self._result)
        return self._future

    def _source_rank(self):
        self.wait()
        return self._source

    def source_rank(self):
        return self._source_rank()


# dtypes gloo cannot carry, and what the host copy holds instead: bfloat16
# widens exactly to float32, bool travels as uint8.
_HOST_DTYPE = {torch.bfloat16: torch.float32, torch.bool: torch.uint8}


def _host_dtype(dtype, reduce=False):
    """The dtype a host copy of ``dtype`` has; for a reduction float16 is
    summed in float32 too (NCCL's average does not overflow where an fp16
    sum would)."""
    if reduce and dtype == torch.float16:
        return torch.float32
    return _HOST_DTYPE.get(dtype, dtype)


class _Staging:
    """Host copies of a collective's operands, and the copies back of the
    ones it writes. An NPU tensor, or a CPU one of a dtype gloo lacks, gets a
    contiguous host copy; other CPU tensors are used as they are."""

    def __init__(self, reduce=False):
        self._back = []
        self._reduce = reduce

    def host(self, t, write=False, read=True):
        """The host tensor gloo works on for ``t``: a copy (``read``) or an
        empty one, copied back into ``t`` by finish() when ``write``."""
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"expected a tensor, got {type(t).__name__}")
        dtype = _host_dtype(t.dtype, self._reduce)
        if not _is_npu(t) and dtype == t.dtype:
            return t
        h = torch.empty(t.shape, dtype=dtype)
        if read:
            with torch.no_grad():
                h.copy_(t)
        if write:
            self._back.append((t, h))
        return h

    def hosts(self, ts, write=False, read=True):
        return [self.host(t, write, read) for t in ts]

    def finish(self):
        # Below autograd, as NCCL writes: a parameter is a leaf that
        # requires grad.
        with torch.no_grad():
            for t, h in self._back:
                t.copy_(h)
        self._back = []


def _one(tensors, what):
    """reduce_scatter takes one output and one input list per rank (NCCL's
    several-devices form is gone from torch 2.x)."""
    if len(tensors) != 1:
        raise RuntimeError(f"hccl {what}: one tensor per rank, got {len(tensors)}")
    return tensors[0]


def _tensors(t):
    """pybind's single-tensor forms (``pg.allreduce(t)``, which DDP calls)
    next to the list forms torch.distributed uses."""
    return [t] if isinstance(t, torch.Tensor) else list(t)


def _options(opts, kind, **fields):
    """``opts`` when it is an options object, else a new ``kind`` with
    ``fields`` (the values the short forms pass: a root, a ReduceOp)."""
    if isinstance(opts, kind):
        return opts
    o = kind()
    for k, v in fields.items():
        if v is not None and not isinstance(v, kind):
            setattr(o, k, v)
    return o


def _collective(fn):
    """A collective's body runs below autograd (it writes its operands in
    place, as NCCL does from C++)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with torch.no_grad():
            return fn(*args, **kwargs)
    return wrapper


class ProcessGroupHCCL(_ProcessGroup):
    """The group ``init_process_group("hccl")`` makes (see the module)."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._gloo = _c10d.ProcessGroupGloo(store, rank, size, timeout)

    def getBackendName(self):
        return BACKEND

    # torch 2.x keeps a group's name in its C++ backends, of which this
    # group has none ("ProcessGroup name not set"): DeviceMesh and the
    # functional collectives (DTensor, FSDP2) look groups up by it.
    def _set_group_name(self, name):
        self._group_name = name

    @property
    def group_name(self):
        if getattr(self, "_group_name", None) is None:
            raise RuntimeError("ProcessGroup name not set")
        return self._group_name

    def name(self):
        return BACKEND

    # -- helpers

    def _reduce_op(self, op, tensors, what):
        """gloo's op for ``op`` on ``tensors`` (the user's), and whether the
        result is then divided by the group's size (AVG)."""
        if op == dist.ReduceOp.AVG:
            for t in tensors:
                if not t.is_floating_point():
                    raise RuntimeError(f"hccl {what}: ReduceOp.AVG takes floating point "
                                       f"tensors, got {t.dtype}")
            return dist.ReduceOp.SUM, True
        if hasattr(dist.ReduceOp, "PREMUL_SUM") and op == dist.ReduceOp.PREMUL_SUM:
            raise RuntimeError(f"hccl {what}: ReduceOp.PREMUL_SUM is not supported")
        if any(t.dtype == torch.bool for t in tensors):
            # NCCL's: a sum of booleans is an or, a product an and.
            if op == dist.ReduceOp.SUM:
                return dist.ReduceOp.MAX, False
            if op == dist.ReduceOp.PRODUCT:
                return dist.ReduceOp.MIN, False
        return op, False

    def _allreduce_host(self, tensors, hosts, op, what):
        gloo_op, average = self._reduce_op(op, tensors, what)
        opts = _c10d.AllreduceOptions()
        opts.reduceOp = gloo_op
        self._gloo.allreduce(hosts, opts).wait()
        if average:
            self._average(hosts)

    def _average(self, hosts):
        """AVG, which gloo lacks: the SUM it gave, divided by the group's size."""
        for h in hosts:
            h.div_(self.size())

    def _check_whole(self, whole, whole_name, part, part_name, what):
        """``whole`` must hold the group's size times ``part``'s elements, of
        ``part``'s dtype (checked on each rank before anything is sent)."""
        if whole.numel() != part.numel() * self.size():
            raise RuntimeError(f"hccl {what}: the {whole_name} has {whole.numel()} elements, "
                               f"not the {part_name}'s {part.numel()} times the group's size "
                               f"{self.size()}")
        if whole.dtype != part.dtype:
            raise RuntimeError(f"hccl {what}: the {whole_name}'s dtype {whole.dtype} is not "
                               f"the {part_name}'s {part.dtype}")

    # -- collectives (each returns a finished work)

    @_collective
    def broadcast(self, tensors, opts=None):
        tensors = _tensors(tensors)
        # pybind's short form: broadcast(tensor, root).
        opts = _options(opts, _c10d.BroadcastOptions,
                        rootRank=opts if isinstance(opts, int) else None)
        stage = _Staging()
        root = opts.rootRank == self.rank()
        hosts = stage.hosts(tensors, write=not root, read=root)
        self._gloo.broadcast(hosts, opts).wait()
        stage.finish()
        return _finished(tensors)

    @_collective
    def allreduce(self, tensors, opts=None):
        tensors = _tensors(tensors)
        # pybind's short forms: allreduce(tensor or list, op).
        opts = _options(opts, _c10d.AllreduceOptions, reduceOp=opts)
        stage = _Staging(reduce=True)
        self._allreduce_host(tensors, stage.hosts(tensors, write=True), opts.reduceOp,
                             "allreduce")
        stage.finish()
        return _finished(tensors)

    @_collective
    def allreduce_coalesced(self, tensors, opts=None):
        tensors = _tensors(tensors)
        opts = _options(opts, _c10d.AllreduceCoalescedOptions)
        stage = _Staging(reduce=True)
        for t, h in zip(tensors, stage.hosts(tensors, write=True)):
            self._allreduce_host([t], [h], opts.reduceOp, "allreduce_coalesced")
        stage.finish()
        return _finished(tensors)

    @_collective
    def reduce(self, tensors, opts=None, op=None):
        tensors = _tensors(tensors)
        # pybind's short form: reduce(tensor, root, op).
        opts = _options(opts, _c10d.ReduceOptions,
                        rootRank=opts if isinstance(opts, int) else None, reduceOp=op)
        stage = _Staging(reduce=True)
        gloo_op, average = self._reduce_op(opts.reduceOp, tensors, "reduce")
        root = opts.rootRank == self.rank()
        hosts = stage.hosts(tensors, write=root)
        ropts = _c10d.ReduceOptions()
        ropts.reduceOp = gloo_op
        ropts.rootRank = opts.rootRank
        ropts.rootTensor = opts.rootTensor
        self._gloo.reduce(hosts, ropts).wait()
        if average and root:  # gloo's reduce gives the sum on the root only
            self._average(hosts)
        stage.finish()
        return _finished(tensors)

    @_collective
    def allgather(self, output_lists, inputs, opts=None):
        if isinstance(inputs, torch.Tensor):  # pybind's allgather(outputs, input)
            output_lists, inputs = [output_lists], [inputs]
        stage = _Staging()
        outs = [stage.hosts(o, write=True, read=False) for o in output_lists]
        self._gloo.allgather(outs, stage.hosts(inputs), _c10d.AllgatherOptions()).wait()
        stage.finish()
        return _finished(output_lists)

    @_collective
    def allgather_coalesced(self, output_lists, inputs, opts=None):
        # output_lists[r][i] receives rank r's inputs[i].
        for i, t in enumerate(inputs):
            self.allgather([[outs[i] for outs in output_lists]], [t])
        return _finished(output_lists)

    @_collective
    def _allgather_base(self, output, input, opts=None):
        self._check_whole(output, "output", input, "input", "all_gather_into_tensor")
        stage = _Staging()
        out = stage.host(output, write=True, read=False)
        chunks = list(out.view(self.size(), -1).unbind(0))
        inp = stage.host(input).reshape(-1)
        self._gloo.allgather([chunks], [inp], _c10d.AllgatherOptions()).wait()
        stage.finish()
        return _finished([output])

    @_collective
    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        for o, i in zip(outputs, inputs):
            self._allgather_base(o, i)
        return _finished(outputs)

    @_collective
    def gather(self, output_lists, inputs, opts):
        stage = _Staging()
        outs = [stage.hosts(o, write=True, read=False) for o in output_lists]
        self._gloo.gather(outs, stage.hosts(inputs), opts).wait()
        stage.finish()
        return _finished(output_lists)

    @_collective
    def scatter(self, outputs, input_lists, opts):
        stage = _Staging()
        ins = [stage.hosts(i) for i in input_lists]
        self._gloo.scatter(stage.hosts(outputs, write=True, read=False), ins, opts).wait()
        stage.finish()
        return _finished(outputs)

    def _reduce_scatter_parts(self, output, parts, op, what):
        """Reduces ``parts`` (together the group's size times ``output``'s
        elements) and writes this rank's part to ``output``: gloo has no
        reduce-scatter in torch 1.13, so every rank reduces the whole and
        keeps its part. The whole is one host copy, in the dtype gloo
        reduces."""
        dtype = _host_dtype(output.dtype, reduce=True)
        flat = torch.cat([t.reshape(-1).to("cpu", dtype) for t in parts])
        self._allreduce_host([output], [flat], op, what)
        n = output.numel()
        output.copy_(flat[self.rank() * n:(self.rank() + 1) * n].view(output.shape))

    @_collective
    def reduce_scatter(self, outputs, input_lists, opts):
        output = _one(outputs, "reduce_scatter")
        inputs = _one(input_lists, "reduce_scatter")
        if len(inputs) != self.size():
            raise RuntimeError(f"hccl reduce_scatter: {len(inputs)} inputs for a group of "
                               f"{self.size()}")
        for t in inputs:
            if t.numel() != output.numel() or t.dtype != output.dtype:
                raise RuntimeError("hccl reduce_scatter: every input must have the output's "
                                   "size and dtype")
        self._reduce_scatter_parts(output, inputs, opts.reduceOp, "reduce_scatter")
        return _finished(outputs)

    @_collective
    def _reduce_scatter_base(self, output, input, opts):
        self._check_whole(input, "input", output, "output", "reduce_scatter_tensor")
        self._reduce_scatter_parts(output, [input], opts.reduceOp, "reduce_scatter_tensor")
        return _finished([output])

    @_collective
    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts):
        for o, i in zip(outputs, inputs):
            self._reduce_scatter_base(o, i, opts)
        return _finished(outputs)

    @_collective
    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        stage = _Staging()
        out = stage.host(output, write=True, read=False)
        self._gloo.alltoall_base(out, stage.host(input), output_split_sizes,
                                 input_split_sizes, _c10d.AllToAllOptions()).wait()
        stage.finish()
        return _finished([output])

    @_collective
    def alltoall(self, outputs, inputs, opts=None):
        if len(outputs) != self.size() or len(inputs) != self.size():
            raise RuntimeError(f"hccl all_to_all: {len(outputs)} outputs and {len(inputs)} "
                               f"inputs for a group of {self.size()}")
        dtypes = {t.dtype for t in list(outputs) + list(inputs)}
        if len(dtypes) != 1:
            raise RuntimeError("hccl all_to_all: the tensors' dtypes differ")
        dtype = _host_dtype(dtypes.pop())
        flat_in = torch.cat([t.reshape(-1).cpu() for t in inputs]).to(dtype)
        flat_out = torch.empty(sum(t.numel() for t in outputs), dtype=dtype)
        self._gloo.alltoall_base(flat_out, flat_in, [t.numel() for t in outputs],
                                 [t.numel() for t in inputs], _c10d.AllToAllOptions()).wait()
        for t, part in zip(outputs, flat_out.split([t.numel() for t in outputs])):
            t.copy_(part.view(t.shape))
        return _finished(outputs)

    def barrier(self, opts=None):
        self._gloo.barrier(_c10d.BarrierOptions()).wait()
        return _finished([])

    # -- point to point

    def send(self, tensors, dst, tag=0):
        stage = _Staging()
        return _Pending(self._gloo.send(stage.hosts(tensors), dst, tag), stage, tensors, dst)

    def recv(self, tensors, src, tag=0):
        stage = _Staging()
        hosts = stage.hosts(tensors, write=True, read=False)
        return _Pending(self._gloo.recv(hosts, src, tag), stage, tensors, src)

    def recv_anysource(self, tensors, tag=0):
        stage = _Staging()
        hosts = stage.hosts(tensors, write=True, read=False)
        return _Pending(self._gloo.recv_anysource(hosts, tag), stage, tensors)


def _create(store, rank, size, timeout):
    return ProcessGroupHCCL(store, rank, size, timeout)


def is_hccl_available():
    """torch_npu's name: whether init_process_group("hccl") works here."""
    return dist.is_available() and dist.is_gloo_available()


def _ddp_inputs_to_npu(to_kwargs):
    """torch 1.13's DistributedDataParallel moves its inputs to
    ``device_ids[0]`` read as a CUDA index, through a CUDA side stream (torch
    2.x moves them to the module's device type). With no CUDA there, the
    index is the NPU's: the inputs move to that NPU on its current stream."""
    from torch.utils._pytree import tree_map

    @functools.wraps(to_kwargs)
    def wrapper(inputs, kwargs, device_id, use_side_stream_for_tensor_copies):
        if _cuda_is_available() or not isinstance(device_id, int):
            return to_kwargs(inputs, kwargs, device_id, use_side_stream_for_tensor_copies)
        dev = npu.torch_device(device_id)

        def move(x):
            return x.to(dev) if isinstance(x, torch.Tensor) else x
        # The replicas' form DDP unpacks: one input tuple and one kwargs dict.
        return (tuple(tree_map(move, tuple(inputs or ()))),), (tree_map(move, dict(kwargs or {})),)
    return wrapper


# fully_shard's (FSDP2's) own ops, defined by torch when FSDP2 is imported,
# have kernels for CPU and CUDA only: on NPU tensors they reached the CPU
# fallback, which copies, so the all-gather's input was no longer a view of
# its output. Their CPU kernels are device-generic (they allocate on the
# `device` argument and copy with ATen ops), so the NPU's call them.
# Registered now, before torch defines the ops, as the dispatcher allows.
_FSDP_OPS = ("all_gather_copy_in", "split_with_sizes_copy", "chunk_cat")
_fsdp_library = None


def _cpu_kernel_of(name):
    def kernel(*args, **kwargs):
        op = getattr(torch.ops.fsdp, name).default
        if name != "split_with_sizes_copy":
            return op._op_dk(torch._C.DispatchKey.CPU, *args, **kwargs)
        # The copy-out into the unsharded parameters, which autograd saved
        # in the forward: CUDA's split_with_sizes_copy leaves the version
        # of `out` alone (pytorch#132014) and FSDP2 relies on it; the CPU
        # kernel bumps it, and the backward then refused the saved
        # parameters ("modified by an inplace operation").
        out = kwargs["out"] if "out" in kwargs else args[-1]
        versions = [t._version for t in out]
        op._op_dk(torch._C.DispatchKey.CPU, *args, **kwargs)
        for t, v in zip(out, versions):
            torch._C._autograd._unsafe_set_version_counter(t, v)
    kernel.__name__ = name
    return kernel


def _register_fsdp_ops():
    global _fsdp_library
    _fsdp_library = torch.library.Library("fsdp", "FRAGMENT")
    for name in _FSDP_OPS:
        _fsdp_library.impl(name, _cpu_kernel_of(name), "PrivateUse1")


def install():
    if not is_hccl_available() or hasattr(dist.Backend, BACKEND.upper()):
        return
    if npu._DEVICE_TYPE == "privateuseone":  # torch 1.13
        from torch.nn.parallel import distributed as ddp
        ddp._to_kwargs = _ddp_inputs_to_npu(ddp._to_kwargs)
    else:
        _register_fsdp_ops()
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        # torch >= 2.2: also the default backend for NPU tensors (backend=None).
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu", npu._DEVICE_TYPE])
    else:
        dist.Backend.register_backend(BACKEND, _create)
