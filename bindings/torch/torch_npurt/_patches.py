"""torch_npu's spellings on torch 1.13, where the device cannot be renamed.

torch 1.13 knows the backend only as ``privateuseone``; ``torch.device("npu")``
raises inside torch's C++ parser, which no Python code can reach. What the
package can intercept, it translates:

- ``Tensor.npu(device=None, non_blocking=False)``, ``Tensor.is_npu``,
  ``Module.npu(device=None)``;
- ``Tensor.to("npu")`` / ``to("npu:1")`` / ``to(device="npu")`` and the same
  for ``Module.to``;
- ``device="npu"`` (or ``"npu:N"``) in torch's factory functions (``torch.empty``,
  ``zeros``, ``ones``, ``full``, ``rand``, ``randn``, ``randint``, ``arange``,
  ``tensor``, ``as_tensor``, ``eye``, ``linspace``, ``*_like``,
  ``sparse_coo_tensor``, ...).

Pinned memory (torch 1.13 binds it to CUDA; here it is libnpurt's
``npurtMallocHost``, see ``npu_pinned.cpp``):

- ``Tensor.pin_memory()`` / ``is_pinned()`` without a device mean the
  current NPU (``pin_memory(device)`` reaches the backend's kernels already);
- ``pin_memory=True`` in the factory functions above;
- ``DataLoader(pin_memory=True)`` pins for the NPU (in the main process, or
  in a pin-memory thread of ours when ``num_workers > 0``: 1.13's thread
  calls ``torch.cuda.set_device``).

Autograd: ``torch.autograd.backward`` / ``grad`` (so ``Tensor.backward``)
insert the stream waits 1.13's engine makes only for CUDA (``_C._backward_*``).

Not reachable, documented: ``torch.device("npu")``, ``device="npu"`` in
functions not listed above, "npu" inside TorchScript, and ``Tensor.device``
which prints ``privateuseone:0``.
"""

import functools

import torch

_FACTORIES = [
    "empty", "empty_strided", "zeros", "ones", "full", "rand", "randn", "randint",
    "randperm", "arange", "range", "linspace", "logspace", "eye", "tensor", "as_tensor",
    "empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
    "randint_like", "scalar_tensor", "normal", "sparse_coo_tensor",
]

_installed = False


def translate(device):
    """'npu' / 'npu:N' -> the backend's device; anything else unchanged."""
    if isinstance(device, str):
        kind, sep, idx = device.partition(":")
        if kind == "npu":
            return "privateuseone" + sep + idx
    return device


def _is_cpu(device):
    if device is None:
        return True
    return torch.device(translate(device) if isinstance(device, str) else device).type == "cpu"


def _wrap_device_kw(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if "device" in kwargs:
            kwargs["device"] = translate(kwargs["device"])
        # pin_memory=True: 1.13 asks CUDA for the pinned allocator. Make the
        # tensor in pageable memory, then pin it for the current NPU.
        if kwargs.get("pin_memory") and _is_cpu(kwargs.get("device")) and _npu_available():
            kwargs["pin_memory"] = False
            return _pin(fn(*args, **kwargs), None)
        return fn(*args, **kwargs)
    return wrapper


def _npu_available():
    from . import npu
    return npu.is_available()


def _pin_device(device):
    """The torch.device that a pin_memory(device) argument names for us."""
    if device is None:
        return torch.device("privateuseone", _npu_index(None))
    if isinstance(device, str):
        device = translate(device)
    return torch.device(device)


_tensor_pin_memory = torch.Tensor.pin_memory
_tensor_is_pinned = torch.Tensor.is_pinned


def _pin(t, device):
    if device is None and not _npu_available():
        return _tensor_pin_memory(t)  # torch's own behaviour (CUDA)
    if not t.is_cpu and device is None:
        raise RuntimeError("cannot pin '%s': only dense CPU tensors can be pinned" % t.type())
    return _tensor_pin_memory(t, _pin_device(device))


# torch's own: transfer_to_npu makes torch.cuda.is_available the NPU's.
_cuda_is_available = torch.cuda.is_available


def _wants_npu_pin(loader):
    if not loader.pin_memory:
        return None
    dev = loader.pin_memory_device
    if not dev:
        if _cuda_is_available() or not _npu_available():
            return None
        return "npu"
    kind = dev.partition(":")[0]
    return dev if kind in ("npu", "privateuseone") else None


def _pin_memory_loop(in_queue, out_queue, device_id, done_event, device):
    """torch 1.13's pin-memory thread for the NPU (it calls
    torch.cuda.set_device): the same loop, on the loader's NPU."""
    import queue
    from torch.utils.data._utils import MP_STATUS_CHECK_INTERVAL
    from torch.utils.data._utils.pin_memory import pin_memory
    from torch._utils import ExceptionWrapper
    from . import npu

    torch.set_num_threads(1)
    npu.set_device(device_id)
    while not done_event.is_set():
        try:
            r = in_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)
        except queue.Empty:
            continue
        idx, data = r
        if not done_event.is_set() and not isinstance(data, ExceptionWrapper):
            try:
                data = pin_memory(data, device)
            except Exception:
                data = ExceptionWrapper(
                    where="in pin memory thread for NPU {}".format(device_id))
            r = (idx, data)
        while not done_event.is_set():
            try:
                out_queue.put(r, timeout=MP_STATUS_CHECK_INTERVAL)
                break
            except queue.Full:
                continue
        del r, idx, data


def _install_dataloader():
    import queue
    import threading
    from torch.utils.data import dataloader as dl

    base_init = dl._BaseDataLoaderIter.__init__

    @functools.wraps(base_init)
    def init(self, loader):
        base_init(self, loader)
        device = _wants_npu_pin(loader)
        self._npu_pin_device = device
        if device is not None:
            # The multi-process iterator would start 1.13's CUDA thread:
            # it starts ours instead (below).
            self._pin_memory = not isinstance(self, dl._MultiProcessingDataLoaderIter)
            self._pin_memory_device = device

    dl._BaseDataLoaderIter.__init__ = init

    mp_init = dl._MultiProcessingDataLoaderIter.__init__

    @functools.wraps(mp_init)
    def init_mp(self, loader):
        mp_init(self, loader)
        device = self._npu_pin_device
        if device is None:
            return
        from . import npu
        # Nothing was read from the queue yet: put the pin thread between
        # the workers' results and the iterator.
        self._pin_memory_thread_done_event = threading.Event()
        self._data_queue = queue.Queue()
        t = threading.Thread(
            target=_pin_memory_loop,
            args=(self._worker_result_queue, self._data_queue, npu.current_device(),
                  self._pin_memory_thread_done_event, device))
        t.daemon = True
        t.start()
        self._pin_memory_thread = t
        self._pin_memory = True

    dl._MultiProcessingDataLoaderIter.__init__ = init_mp


def install_torch2():
    """What torch 2.x still needs: DataLoader(pin_memory=True) without a
    pin_memory_device pins only for CUDA; with no CUDA and an NPU present
    it pins for the NPU, as on 1.13 (torch_npu does the same)."""
    from torch.utils.data import dataloader as dl

    get_iterator = dl.DataLoader._get_iterator

    @functools.wraps(get_iterator)
    def _get_iterator(self):
        if not self.pin_memory_device and _wants_npu_pin(self):
            self.pin_memory_device = torch._C._get_privateuse1_backend_name()
        return get_iterator(self)

    dl.DataLoader._get_iterator = _get_iterator
    if _torch_at_least(2, 5):
        _install_pin_without_device()
    _install_compile()
    _install_transformer()


def _install_transformer():
    """nn.TransformerEncoder in eval mode with a padding mask turns its input
    into a nested tensor (torch 2.x counts the PrivateUse1 device among the
    fast path's devices), and nested tensors have no NPU kernels: it failed
    with "Could not run 'aten::_to_copy' ... 'NestedTensornpu'". On the NPU
    the encoder takes its dense path for that call (the same values; the
    nested path only leaves padded positions zero)."""
    encoder = torch.nn.TransformerEncoder
    forward = encoder.forward
    name = torch._C._get_privateuse1_backend_name()

    @functools.wraps(forward)
    def encoder_forward(self, src, *args, **kwargs):
        if not (getattr(self, "use_nested_tensor", False) and isinstance(src, torch.Tensor)
                and src.device.type == name):
            return forward(self, src, *args, **kwargs)
        self.use_nested_tensor = False
        try:
            return forward(self, src, *args, **kwargs)
        finally:
            self.use_nested_tensor = True

    encoder.forward = encoder_forward


def _graph_on_npu(gm, inputs):
    """Whether a graph dynamo hands a backend touches an NPU tensor: an input
    or any value it computes (graphs may make NPU tensors from none)."""
    name = torch._C._get_privateuse1_backend_name()
    values = list(inputs) + list(gm.parameters()) + list(gm.buffers())
    for node in gm.graph.nodes:
        values.append(node.meta.get("val", node.meta.get("example_value")))
    for v in values:
        for t in v if isinstance(v, (list, tuple)) else (v,):
            if isinstance(t, torch.Tensor) and t.device.type == name:
                return True
    return False


_compile_warned = False  # the aot_eager warning is given once per process


def _install_compile():
    """torch.compile's default backend, inductor, generates code for CPUs
    and GPUs only (on an NPU graph it fails with "Device npu not
    supported"). A graph on the NPU is compiled with aot_eager instead:
    dynamo's capture and AOTAutograd's joint graph, run with the NPU's ops
    (no fusion, so no speedup), with a warning the first time. Graphs of
    other devices still go to inductor."""
    wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
    if wrapper is None:
        return
    compile_graph = wrapper.__call__

    @functools.wraps(compile_graph)
    def __call__(self, model_, inputs_):
        if not _graph_on_npu(model_, inputs_):
            return compile_graph(self, model_, inputs_)
        global _compile_warned
        if not _compile_warned:
            _compile_warned = True
            import warnings
            warnings.warn("torch.compile: inductor generates no code for the NPU; graphs on "
                          "the NPU run with the aot_eager backend (captured, not fused)",
                          UserWarning, stacklevel=2)
        from torch._dynamo.backends.registry import lookup_backend
        return lookup_backend("aot_eager")(model_, inputs_)

    wrapper.__call__ = __call__


def _torch_at_least(major, minor):
    parts = torch.__version__.split("+")[0].split(".")
    return (int(parts[0]), int(parts[1])) >= (major, minor)


def _install_pin_without_device():
    """torch >= 2.5 deprecates Tensor.pin_memory(device) and pins for the
    current accelerator (ours) without it, yet its DataLoader passes
    pin_memory_device to every tensor, warning once per batch. For our
    device the loader's pin step (in the pin thread, which has made the
    loader's NPU current, or in the main thread) pins without it."""
    from torch.utils.data._utils import pin_memory as pm

    pin = pm.pin_memory
    name = torch._C._get_privateuse1_backend_name()

    @functools.wraps(pin)
    def pin_memory(data, device=None):
        if isinstance(device, str) and device.partition(":")[0] == name:
            device = None
        return pin(data, device)

    # The loader and the pin thread's loop look it up in the module.
    pm.pin_memory = pin_memory


def _wrap_backward(fn):
    from . import _C

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        saved = _C._backward_prologue()
        try:
            return fn(*args, **kwargs)
        finally:
            _C._backward_epilogue(saved)
    return wrapper


def install_common():
    """What both torch 1.13 and 2.x need: stream waits around backward,
    Tensor.record_stream taking our streams, and Tensor.type taking the
    legacy NPU types."""
    torch.autograd.backward = _wrap_backward(torch.autograd.backward)
    torch.autograd.grad = _wrap_backward(torch.autograd.grad)
    _install_record_stream()
    _install_legacy_type()


def _install_legacy_type():
    """tensor.type(torch.npu.FloatTensor) and tensor.type("torch.npu.FloatTensor"),
    as torch.cuda's legacy types: a tensor of that dtype on its NPU (the
    current one for a tensor elsewhere)."""
    from . import npu

    legacy = torch.Tensor.type

    @functools.wraps(legacy)
    def type_(self, *args, **kwargs):
        cls = npu._legacy_type(args[0] if args else kwargs.get("dtype"))
        if cls is None:
            return legacy(self, *args, **kwargs)
        non_blocking = args[1] if len(args) > 1 else \
            kwargs.get("non_blocking", kwargs.get("async", False))
        device = self.device if self.device.type == npu._DEVICE_TYPE else npu.torch_device()
        return self.to(device=device, dtype=cls.dtype, non_blocking=non_blocking)

    torch.Tensor.type = type_


def _install_sparse_new():
    """tensor.new(indices, values, size) and the other legacy constructors
    of a sparse NPU tensor (torch 1.13's SparseAdam makes its updates so):
    1.13's binding knows the legacy types of CPU and CUDA only ("Unrecognized
    tensor type ID: SparsePrivateUse1"), so they run on a CPU sparse tensor
    of the dtype and the result moves to the NPU."""
    from . import npu

    legacy = torch.Tensor.new

    @functools.wraps(legacy)
    def new(self, *args, **kwargs):
        if not (self.is_sparse and self.device.type == npu._DEVICE_TYPE):
            return legacy(self, *args, **kwargs)
        device = kwargs.pop("device", None)
        device = self.device if device is None else translate(device)
        template = torch.empty((0,), dtype=self.dtype, layout=torch.sparse_coo)
        args = tuple(a.cpu() if isinstance(a, torch.Tensor) else a for a in args)
        return legacy(template, *args, **kwargs).to(device)

    torch.Tensor.new = new


def _install_record_stream():
    """tensor.record_stream(torch.npu.current_stream()), as with torch_npu:
    torch 1.13's binding takes only its own stream objects (1.13 cannot
    build one of ours), so NPU streams (also a torch.Stream of one on 2.x)
    go to the backend directly. Eager memory
    needs no record (libnpurt's safe free); a graph pool's block does (see
    npu_graph.cpp)."""
    from . import _C, npu

    record = torch.Tensor.record_stream

    @functools.wraps(record)
    def record_stream(self, stream):
        npu_stream = npu._as_stream(stream, strict=False)
        if npu_stream is None:
            return record(self, stream)
        stream = npu_stream
        if self.device.type != npu._DEVICE_TYPE:
            raise RuntimeError("record_stream: a tensor on %s cannot be recorded on NPU stream %r"
                               % (self.device, stream))
        if self.device.index != stream.device_index:
            raise RuntimeError("record_stream: a tensor on %s cannot be recorded on a stream of "
                               "npu:%d" % (self.device, stream.device_index))
        return _C._record_stream(self, stream.stream_id)

    torch.Tensor.record_stream = record_stream


def _to_args(args, kwargs):
    args = tuple(translate(a) for a in args)
    if "device" in kwargs:
        kwargs["device"] = translate(kwargs["device"])
    return args, kwargs


def _npu_index(device):
    from . import npu
    return npu._index(device)


def install():
    global _installed
    if _installed:
        return
    _installed = True

    tensor_to = torch.Tensor.to

    @functools.wraps(tensor_to)
    def to(self, *args, **kwargs):
        args, kwargs = _to_args(args, kwargs)
        return tensor_to(self, *args, **kwargs)

    torch.Tensor.to = to

    def tensor_npu(self, device=None, non_blocking=False,
                   memory_format=torch.preserve_format):
        """Copy to NPU `device` (the current one if None), as torch_npu's."""
        dev = torch.device("privateuseone", _npu_index(device))
        return tensor_to(self, dev, non_blocking=non_blocking, memory_format=memory_format)

    torch.Tensor.npu = tensor_npu
    torch.Tensor.is_npu = property(lambda self: self.device.type == "privateuseone")
    _install_sparse_new()

    module_to = torch.nn.Module.to

    @functools.wraps(module_to)
    def mod_to(self, *args, **kwargs):
        args, kwargs = _to_args(args, kwargs)
        return module_to(self, *args, **kwargs)

    torch.nn.Module.to = mod_to

    def module_npu(self, device=None):
        """Moves all parameters and buffers to NPU `device`, as torch_npu's."""
        dev = torch.device("privateuseone", _npu_index(device))
        return self._apply(lambda t: tensor_to(t, dev))

    torch.nn.Module.npu = module_npu

    def pin_memory(self, device=None):
        """Copies the tensor into pinned memory for NPU `device` (current if
        None): npurtMallocHost, so non_blocking copies are asynchronous."""
        return _pin(self, device)

    def is_pinned(self, device=None):
        """Whether the tensor is in pinned memory of NPU `device` (current if
        None)."""
        if device is None and not _npu_available():
            return _tensor_is_pinned(self)
        if not self.is_cpu:
            return False
        return _tensor_is_pinned(self, _pin_device(device))

    torch.Tensor.pin_memory = pin_memory
    torch.Tensor.is_pinned = is_pinned
    _install_dataloader()

    from torch.jit import _builtins
    for name in _FACTORIES:
        fn = getattr(torch, name, None)
        if fn is not None:
            wrapped = _wrap_device_kw(fn)
            setattr(torch, name, wrapped)
            # TorchScript finds torch's builtins by identity: without this
            # every scripted function that calls torch.zeros & co. failed.
            _builtins._register_builtin(wrapped, "aten::" + name)
