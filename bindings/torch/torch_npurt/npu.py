"""torch_npurt.npu: the device module, with torch_npu's (and torch.cuda's) names.

Devices, streams, events and the memory pool of libnpurt. ``device``
arguments take an index, ``"npu"``/``"npu:N"``, ``"privateuseone:N"`` or a
``torch.device`` of the backend; ``None`` means the current device.
"""

import contextlib
import os
import pickle
import re
import sys
import threading
import types
import warnings

import torch

from . import _C
from . import profiler

_DEVICE_TYPE = "privateuseone"  # set to "npu" by the package on torch >= 2.0

OutOfMemoryError = torch.cuda.OutOfMemoryError
"""Raised when device memory runs out (a RuntimeError; message "NPU out of
memory. Tried to allocate ..."). torch 1.13 maps C++ out-of-memory errors to
this class, whatever the device."""

__all__ = [
    "is_available", "device_count", "set_device", "current_device", "synchronize",
    "get_device_name", "get_device_properties", "device", "torch_device",
    "Stream", "Event", "stream", "current_stream", "default_stream", "set_stream",
    "from_cpu_async",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "memory_stats", "host_memory_stats", "memory_summary", "reset_peak_memory_stats", "empty_cache",
    "mem_get_info", "set_per_process_memory_fraction", "get_per_process_memory_fraction",
    "process_memory_info", "memory_snapshot", "manual_seed", "manual_seed_all", "OutOfMemoryError",
    "profiler", "set_call_sites", "call_sites",
    "NPUGraph", "graph", "graph_pool_handle", "is_current_stream_capturing",
    "make_graphed_callables", "amp", "get_amp_supported_dtype", "is_bf16_supported",
    "set_compile_mode", "config", "ipc_collect",
    "seed", "seed_all", "initial_seed", "get_rng_state", "set_rng_state", "get_rng_state_all",
    "set_rng_state_all", "init", "is_initialized", "memory",
    "utilization", "memory_usage", "device_memory_used", "clock_rate", "list_gpu_processes",
    "get_device_capability", "can_device_access_peer", "memory_stats_as_nested_dict",
    "memory_cached", "max_memory_cached", "reset_max_memory_allocated", "reset_max_memory_cached",
    "get_allocator_backend", "caching_allocator_alloc", "caching_allocator_delete", "device_of",
    "reset_accumulated_memory_stats", "ExternalStream", "set_sync_debug_mode",
    "get_sync_debug_mode",
]


# ------------------------------------------------------------------ devices

# Set by torch_npurt.contrib.transfer_to_npu while it is applied: maps the
# CUDA spellings of a device ("cuda:1", torch.device("cuda")) to the NPU's,
# so every call here that takes a device takes them.
_alias_device = None


def _index(device, optional=True):
    """The device index that `device` names (None: the current one)."""
    if _alias_device is not None:
        device = _alias_device(device)
    if device is None:
        if not optional:
            raise ValueError("a device is required")
        return _C._current_device()
    stream = _as_stream(device, strict=False)
    if stream is not None:
        return stream.device_index
    if isinstance(device, torch.device):
        if device.type != "privateuseone" and device.type != _DEVICE_TYPE:
            raise ValueError("expected an NPU device, got %s" % device)
        return _C._check_device(device.index if device.index is not None else -1)
    if isinstance(device, str):
        kind, _, idx = device.partition(":")
        if kind not in ("npu", "privateuseone", _DEVICE_TYPE):
            raise ValueError("expected an NPU device string ('npu:N'), got %r" % device)
        if idx and not idx.isdigit():
            raise ValueError("invalid NPU device string %r" % device)
        return _C._check_device(int(idx) if idx else -1)
    if isinstance(device, int) and not isinstance(device, bool):
        if device < 0:
            raise ValueError("NPU device index must be >= 0, got %d" % device)
        return _C._check_device(device)
    raise TypeError("invalid NPU device %r" % (device,))


def torch_device(index=None):
    """The torch.device of NPU `index` (the current one if None)."""
    return torch.device(_DEVICE_TYPE, _index(index))


def is_available():
    """True if at least one NPU can be used (npu.ko loaded, render node
    accessible). When False, creating a tensor says why."""
    return _C._device_count() > 0


def device_count():
    return _C._device_count()


def set_device(device):
    """Makes `device` the current NPU; a negative index does nothing (as
    torch.cuda.set_device)."""
    if isinstance(device, int) and not isinstance(device, bool) and device < 0:
        return
    _C._set_device(_index(device, optional=False))


def current_device():
    return _C._current_device()


def synchronize(device=None):
    """Waits for all work on every stream of the device."""
    _C._synchronize(_index(device))


_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode):
    """As torch.cuda.set_sync_debug_mode: "default" (0) lets synchronizing
    operations run quietly, "warn" (1) warns at each, "error" (2) raises
    RuntimeError before it is enqueued. Synchronizing operations are the
    blocking copies between CPU and NPU (.cpu(), .item(), .to("npu") of
    pageable memory, ops run through the CPU) and stream synchronizes;
    torch.npu.synchronize() and Event.synchronize() are asked for by name
    and never flagged. Process-wide."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of "
                               "`default`, `warn`, `error`")
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    if isinstance(debug_mode, bool) or not isinstance(debug_mode, int):
        raise TypeError("debug_mode must be a str or an int, not %s"
                        % type(debug_mode).__name__)
    _C._set_sync_debug_mode(debug_mode)


def get_sync_debug_mode():
    """The mode set_sync_debug_mode set, as an int."""
    return _C._get_sync_debug_mode()


class _Properties:
    def __init__(self, d):
        self.__dict__.update(d)

    def __repr__(self):
        return "_NPUDeviceProperties(name='%s', total_memory=%dMB, copy_engines=%d, " \
               "compute_engines=%d, emulated=%s)" % (
                   self.name, self.total_memory // (1 << 20), self.copy_engine_count,
                   self.compute_engine_count, self.emulated)


def get_device_properties(device=None):
    return _Properties(_C._device_properties(_index(device)))


def get_device_name(device=None):
    return get_device_properties(device).name


def get_device_capability(device=None):
    """(major, minor) of the NPU's architecture (libnpurt's properties), as
    torch.cuda.get_device_capability."""
    p = get_device_properties(device)
    return (p.major, p.minor)


def can_device_access_peer(device, peer_device):
    """Whether `device` can reach `peer_device`'s memory directly (libnpurt's
    npurtDeviceCanAccessPeer), as torch.cuda.can_device_access_peer."""
    return bool(_C._can_access_peer(_index(device, False), _index(peer_device, False)))


class device:
    """Context manager that makes `idx` the current NPU."""

    def __init__(self, idx):
        # None or a negative index: a no-op, as torch.cuda.device.
        negative = isinstance(idx, int) and not isinstance(idx, bool) and idx < 0
        self.idx = -1 if idx is None or negative else _index(idx)
        self.prev = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev = current_device()
            set_device(self.idx)

    def __exit__(self, *exc):
        if self.prev >= 0:
            set_device(self.prev)
        return False


class device_of(device):
    """Makes the current device that of `obj` (a tensor or storage) for a
    scope; one not on an NPU changes nothing (torch.cuda.device_of)."""

    def __init__(self, obj):
        dev = getattr(obj, "device", None)
        on_npu = dev is not None and dev.type == _DEVICE_TYPE
        super().__init__(dev.index if on_npu else None)


# ------------------------------------------------------------------ streams

# torch >= 2.2's device-generic stream (torch.Stream): NPU streams are of
# its kind there, so torch's own calls that take one (torch.accelerator,
# Tensor.record_stream) take them. torch 1.13's has no such fields.
_TorchStream = getattr(torch, "Stream", None)
if _TorchStream is not None and not hasattr(_TorchStream, "stream_id"):
    _TorchStream = None


class Stream(*((_TorchStream,) if _TorchStream is not None else ())):
    """An NPU stream (a libnpurt stream from the device's pool).

    Lower priority numbers are higher priority; the range is
    ``_C._stream_priority_range()`` (least, greatest). On torch >= 2.2 a
    torch.Stream.
    """

    def __new__(cls, device=None, priority=0, **kwargs):
        if "_id" in kwargs:
            return cls._make(*kwargs["_id"])
        if kwargs:
            raise TypeError("unexpected arguments %s" % sorted(kwargs))
        if not isinstance(priority, int):
            raise TypeError("priority must be an int")
        dev = _index(device)
        return cls._make(dev, _C._stream_pool(dev, priority))

    def __init__(self, *args, **kwargs):
        pass  # made by __new__ (torch.Stream's fields are read-only)

    @classmethod
    def _make(cls, dev, sid):
        if _TorchStream is not None:
            return _TorchStream.__new__(cls, stream_id=sid, device_index=dev,
                                        device_type=_C._device_type)
        self = object.__new__(cls)
        self.device_index = dev
        self.stream_id = sid
        return self

    @classmethod
    def _wrap(cls, dev, sid):
        return cls._make(dev, sid)

    @property
    def device(self):
        return torch.device(_DEVICE_TYPE, self.device_index)

    @property
    def priority(self):
        return _C._stream_get_priority(self.device_index, self.stream_id)

    @property
    def npu_stream(self):
        """The libnpurt stream (npurtStream_t) as an int, to hand to code
        that calls libnpurt itself (torch_npu's name; 0: the default
        stream)."""
        return _C._stream_handle(self.device_index, self.stream_id)

    def query(self):
        """True if all work on the stream has completed."""
        return _C._stream_query(self.device_index, self.stream_id)

    def synchronize(self):
        _C._stream_synchronize(self.device_index, self.stream_id)

    def recover(self):
        """After a device fault on this stream (reported as a RuntimeError,
        later work cancelled), lets the stream run again (npurtStreamRecover).
        torch_npurt's extension: torch_npu has no such call."""
        _C._stream_recover(self.device_index, self.stream_id)

    def wait_event(self, event):
        event.wait(self)

    def wait_stream(self, stream):
        self.wait_event(_as_stream(stream).record_event())

    def record_event(self, event=None):
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __enter__(self):
        """``with stream:`` is ``with torch_npurt.npu.stream(stream):`` (as
        torch 2.x's streams)."""
        ctx = StreamContext(self)
        _stream_contexts().append(ctx)
        return ctx.__enter__()

    def __exit__(self, *exc):
        return _stream_contexts().pop().__exit__(*exc)

    def __eq__(self, other):
        # torch.Stream objects of NPU streams (torch.accelerator's) too.
        other = _as_stream(other, strict=False)
        return other is not None and \
            (self.device_index, self.stream_id) == (other.device_index, other.stream_id)

    def __hash__(self):
        return hash((self.device_index, self.stream_id))

    # A stream is a handle: copies are the stream itself, and a pickle
    # names it (in this process).
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        return (self._make, (self.device_index, self.stream_id))

    def __repr__(self):
        return "<torch_npurt.npu.Stream device=%s id=%d>" % (self.device, self.stream_id)


class ExternalStream(Stream):
    """A libnpurt stream made outside torch (an npurtStream_t as an int, of
    `device`'s primary context), used like any Stream, as
    torch.cuda.ExternalStream. torch does not destroy it: its owner keeps
    it alive while torch has work on it. 0 is the default stream."""

    def __new__(cls, stream_ptr, device=None):
        dev = _index(device)
        return cls._make(dev, _C._external_stream(dev, int(stream_ptr)))


_thread = threading.local()


def _stream_contexts():
    """This thread's contexts of ``with stream:`` blocks, innermost last
    (with-blocks nest within a thread, so __exit__ pops its own)."""
    if not hasattr(_thread, "stream_contexts"):
        _thread.stream_contexts = []
    return _thread.stream_contexts


def _as_stream(stream, strict=True):
    """`stream` as an NPU Stream: a torch.Stream of an NPU stream (as
    torch.accelerator.current_stream() returns) becomes one. Anything else
    is a TypeError, or None when not strict."""
    if isinstance(stream, Stream):
        return stream
    if _TorchStream is not None and isinstance(stream, _TorchStream) and \
            stream.device_type == _C._device_type:
        return Stream._wrap(_C._check_device(stream.device_index), stream.stream_id)
    if strict:
        raise TypeError("expected an NPU stream (torch_npurt.npu.Stream), got %r" % (stream,))
    return None


def current_stream(device=None):
    dev = _index(device)
    return Stream._wrap(dev, _C._current_stream(dev))


def default_stream(device=None):
    return Stream._wrap(_index(device), 0)


def set_stream(stream):
    """Makes `stream` the current stream of its device, and its device the
    current NPU (for this thread), as torch.cuda.set_stream."""
    if stream is None:
        return
    stream = _as_stream(stream)
    if stream.device_index != current_device():
        set_device(stream.device_index)
    _C._set_stream(stream.device_index, stream.stream_id)


class StreamContext:
    """Work inside goes to `stream`, on its device; both are restored after."""

    def __init__(self, stream):
        self.stream = None if stream is None else _as_stream(stream)
        self.saved = None

    def __enter__(self):
        s = self.stream
        if s is None:
            return None
        prev_dev = current_device()
        set_device(s.device_index)
        self.saved = (prev_dev, current_stream(s.device_index))
        set_stream(s)
        return s

    def __exit__(self, *exc):
        if self.saved is not None:
            prev_dev, prev_stream = self.saved
            set_stream(prev_stream)
            set_device(prev_dev)
        return False


def stream(stream):
    return StreamContext(stream)


def from_cpu_async(tensor, device=None):
    """An NPU copy of the CPU tensor `tensor`, queued on the current stream
    without waiting for it (the seed docs' call; torch spells it
    `tensor.to("npu", non_blocking=True)`). Synchronize the stream, or wait
    for an event recorded after it, before reading the copy from another
    stream. A pinned tensor is read when the stream reaches the copy (leave
    it unchanged until then, as in CUDA); a pageable one is staged before
    this returns, so it may be changed at once."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("from_cpu_async: expected a torch.Tensor, got %s" %
                        type(tensor).__name__)
    if tensor.device.type != "cpu":
        raise ValueError("from_cpu_async copies a CPU tensor; this one is on %s"
                         % tensor.device)
    return tensor.to(torch_device(_index(device)), non_blocking=True)


# ------------------------------------------------------------------- events

class Event:
    """An NPU event. Timing is opt-in (enable_timing=True), as in torch_npu."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.enable_timing = bool(enable_timing)
        self._ev = _C._Event(self.enable_timing, bool(blocking), bool(interprocess))
        self._device = None

    @classmethod
    def from_ipc_handle(cls, device, handle):
        """Opens an event of another process from its ipc_handle() bytes."""
        ev = cls.__new__(cls)
        ev.enable_timing = False
        ev._device = _index(device)
        ev._ev = _C._Event.from_ipc_handle(ev._device, bytes(handle))
        return ev

    @property
    def device(self):
        """The NPU the event was first recorded on (or opened on), as
        torch.cuda.Event.device; None before."""
        return None if self._device is None else torch_device(self._device)

    def ipc_handle(self):
        """Bytes that open this interprocess event in another process of the
        same user (npurtIpcGetEventHandle)."""
        return self._ev.ipc_handle()

    def record(self, stream=None):
        stream = current_stream() if stream is None else _as_stream(stream)
        self._ev.record(stream.device_index, stream.stream_id)
        if self._device is None:
            self._device = stream.device_index

    def wait(self, stream=None):
        """Makes later work on `stream` (default: current) wait for this event."""
        stream = current_stream() if stream is None else _as_stream(stream)
        self._ev.wait(stream.device_index, stream.stream_id)

    def query(self):
        return self._ev.query()

    def synchronize(self):
        self._ev.synchronize()

    def elapsed_time(self, end_event):
        """Milliseconds from this event to `end_event` (device clock)."""
        if not isinstance(end_event, Event):
            raise TypeError("expected an Event")
        return self._ev.elapsed_time(end_event._ev)

    def __repr__(self):
        return "<torch_npurt.npu.Event timing=%s>" % self.enable_timing


# ------------------------------------------------------------------- memory

def memory_stats(device=None):
    """The pool's statistics (libnpurt's npurtMemGetStats) with torch.cuda's
    keys ("all" pools only). active_bytes and requested_bytes are the
    allocated bytes: libnpurt does not keep them apart."""
    return dict(_C._memory_stats(_index(device)))


def host_memory_stats(device=None):
    """The pinned-memory pool's statistics (npurtHostMemGetStats), keys as
    torch.cuda.host_memory_stats's where they exist."""
    return dict(_C._host_memory_stats(_index(device)))


def memory_allocated(device=None):
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None):
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None):
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None):
    _C._reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device=None):
    """Zeroes the pool's counters (allocations, frees, segments, OOMs,
    retries), as torch.cuda.reset_accumulated_memory_stats."""
    _C._reset_accumulated_memory_stats(_index(device))


def memory_stats_as_nested_dict(device=None):
    """memory_stats() with its dotted keys split into nested dicts, as
    torch.cuda.memory_stats_as_nested_dict."""
    nested = {}
    for key, value in memory_stats(device).items():
        node = nested
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return nested


# torch.cuda's deprecated names, which older code still calls.
def memory_cached(device=None):
    warnings.warn("memory_cached is deprecated: use memory_reserved", FutureWarning)
    return memory_reserved(device)


def max_memory_cached(device=None):
    warnings.warn("max_memory_cached is deprecated: use max_memory_reserved", FutureWarning)
    return max_memory_reserved(device)


def reset_max_memory_allocated(device=None):
    warnings.warn("reset_max_memory_allocated resets all peaks now: use "
                  "reset_peak_memory_stats", FutureWarning)
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device=None):
    warnings.warn("reset_max_memory_cached resets all peaks now: use "
                  "reset_peak_memory_stats", FutureWarning)
    reset_peak_memory_stats(device)


def get_allocator_backend():
    """'native': libnpurt's caching pool (there is no other)."""
    return "native"


def caching_allocator_alloc(size, device=None, stream=None):
    """`size` bytes from the allocator tensors use, on `device`; an int
    address, freed by caching_allocator_delete. libnpurt frees safely
    whatever the stream (memory is reused only after the work queued on it
    has run), so `stream` only has to be one of `device`'s."""
    dev = _index(device)
    if stream is not None and stream.device.index != dev:
        raise ValueError("stream %r is not on NPU %d" % (stream, dev))
    return _C._raw_alloc(int(size), dev)


def caching_allocator_delete(mem_ptr):
    """Frees memory from caching_allocator_alloc; any other address raises."""
    _C._raw_delete(int(mem_ptr))


def empty_cache(device=None):
    """Gives the pool's cached, unused memory back to the device: of every
    NPU this process holds memory of when `device` is None (as
    torch.cuda.empty_cache), else of `device`."""
    _C._ipc_collect()
    if device is not None:
        _C._empty_cache(_index(device))
        return
    for i in range(device_count()):
        if _C._mem_usage(i)["process_reserved"]:
            _C._empty_cache(i)


def mem_get_info(device=None):
    """(free, total) device memory in bytes, for all processes."""
    return tuple(_C._mem_get_info(_index(device)))


def set_per_process_memory_fraction(fraction, device=None):
    """Limits the device memory this process's pools hold on `device` to
    `fraction` (0 to 1) of the device's memory, as torch.cuda's: an
    allocation past it raises OutOfMemoryError saying the limit was hit."""
    fraction = float(fraction)
    if not 0.0 <= fraction <= 1.0:
        raise ValueError("Invalid fraction value: %s. Allowed range: 0~1" % fraction)
    dev = _index(device)
    if fraction == 0.0:
        _C._set_memory_limit(1, dev)  # nothing fits
    else:
        _C._set_memory_fraction(fraction, dev)


def get_per_process_memory_fraction(device=None):
    dev = _index(device)
    limit = _C._get_memory_limit(dev)
    return 1.0 if not limit else limit / float(_C._mem_usage(dev)["total"])


def process_memory_info(device=None):
    """This process's device memory on `device` (libnpurt's
    npurtDeviceGetMemUsage): its pools' reserved and allocated bytes over
    all its contexts, what the driver charges it (npu-smi's figure), the
    limit (0: none), and the device's free and total."""
    return dict(_C._mem_usage(_index(device)))


def utilization(device=None):
    """Percent (0-100) of time the NPU's compute engines ran jobs (of any
    process), as torch.cuda.utilization: over the window since the previous
    reading of `device` in this process (the first: since the runtime
    started). A job's time counts when it ends."""
    return int(_C._utilization(_index(device))["compute"])


def memory_usage(device=None):
    """Percent (0-100) of time the NPU's copy engines moved memory, over the
    same kind of window as utilization() (torch.cuda.memory_usage's
    'memory read or written')."""
    return int(_C._utilization(_index(device))["copy"])


def device_memory_used(device=None):
    """Device memory in use on `device` by all processes, in bytes (what
    npu-smi shows), as torch.cuda.device_memory_used."""
    free, total = mem_get_info(device)
    return total - free


def clock_rate(device=None):
    """The device clock in MHz, as torch.cuda.clock_rate."""
    return int(get_device_properties(device).clock_rate_hz // 1000000)


def list_gpu_processes(device=None):
    """The processes that have `device` open and the device memory each
    holds, in torch.cuda.list_gpu_processes's format. Another user's
    processes are seen only by root."""
    dev = _index(device)
    lines = ["NPU:%d" % dev]
    procs = _C._processes(dev)
    if not procs:
        lines.append("no processes are running")
    for p in procs:
        lines.append("process %10d uses %12.3f MB NPU memory"
                     % (p["pid"], p["device_bytes"] / (1024.0 * 1024.0)))
    return "\n".join(lines)


_SITE = re.compile(r"^(.*):(\d+)(?: in (.*))?$")


def memory_snapshot(device=None):
    """The pool's segments and blocks, in torch.cuda.memory_snapshot()'s
    shape; an allocated block's `frames` is the Python line that made it
    (call sites on: set_call_sites)."""
    segs = _C._memory_snapshot(_index(device))
    for seg in segs:
        for b in seg["blocks"]:
            b["frames"] = _frames(b.pop("call_site"))
    return segs


def _frames(site):
    """A call site ("file.py:42 in aten::mm()") as torch's frames list."""
    m = _SITE.match(site) if site else None
    return ([{"filename": m.group(1), "line": int(m.group(2)),
              "name": (m.group(3) or "").rstrip("()")}] if m else [])


def _set_allocator_settings(settings):
    """The caching pool's settings (torch.cuda.memory._set_allocator_settings),
    in PYTORCH_NPU_ALLOC_CONF's syntax: "expandable_segments:True",
    max_split_size_mb, garbage_collection_threshold, roundup_power2_divisions.
    The string replaces the settings whole; a bad key or value raises
    RuntimeError and changes nothing."""
    _C._set_allocator_settings(settings)


def _get_allocator_settings():
    """The settings in force, as _set_allocator_settings takes them."""
    return _C._get_allocator_settings()


def _attach_out_of_memory_observer(observer):
    """Calls observer(device, bytes_requested, device_allocated, device_free)
    when an allocation fails for lack of memory or the limit, before
    OutOfMemoryError is raised (torch.cuda's hook of that name); None
    removes it."""
    _C._attach_out_of_memory_observer(observer)


def _fmt(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.2f %s" % (n, unit))
        n /= 1024.0
    return str(n)


def memory_summary(device=None, abbreviated=False):
    dev = _index(device)
    s = memory_stats(dev)
    free, total = mem_get_info(dev)
    rows = [
        ("Allocated memory", s["allocated_bytes.all.current"], s["allocated_bytes.all.peak"]),
        ("Reserved memory", s["reserved_bytes.all.current"], s["reserved_bytes.all.peak"]),
        ("Non-releasable memory", s["inactive_split_bytes.all.current"],
         s["inactive_split_bytes.all.peak"]),
    ]
    lines = ["=" * 64,
             " NPU memory summary, device %d (libnpurt pool)" % dev,
             "-" * 64,
             " %-24s %18s %18s" % ("Metric", "Current", "Peak")]
    for name, cur, peak in rows:
        lines.append(" %-24s %18s %18s" % (name, _fmt(cur), _fmt(peak)))
    lines.append(" %-24s %18d %18d" % ("Active blocks", s["active.all.current"],
                                        s["active.all.peak"]))
    if not abbreviated:
        lines.append("-" * 64)
        lines.append(" Device memory: %s free of %s" % (_fmt(free), _fmt(total)))
        lines.append(" Segments allocated/freed: %d / %d" % (s["segment.all.allocated"],
                                                            s["segment.all.freed"]))
        lines.append(" Allocations/frees: %d / %d" % (s["allocation.all.allocated"],
                                                     s["allocation.all.freed"]))
        lines.append(" OOMs: %d, retries after emptying the cache: %d" % (
            s["num_ooms"], s["num_alloc_retries"]))
    lines.append("=" * 64)
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------- graphs

_CAPTURE_MODES = ("global", "thread_local", "relaxed")


def is_current_stream_capturing():
    """True if the current stream of the current device is capturing."""
    dev = current_device()
    return _C._stream_is_capturing(dev, _C._current_stream(dev))


def graph_pool_handle():
    """A memory pool id to share between captures: ``graph(g, pool=h)``."""
    return tuple(_C._graph_pool_handle())


class NPUGraph:
    """A captured sequence of NPU work, replayed as one launch
    (torch_npu's NPUGraph, torch.cuda.CUDAGraph).

    Work queued on the capturing stream between capture_begin() and
    capture_end() is recorded, not run; replay() runs it again on the same
    tensors. Memory allocated during the capture comes from a private pool
    that eager code never reuses, kept until reset() (or until the last
    graph sharing the pool is reset). Synchronous calls (``.item()``,
    ``.cpu()``, a CPU fallback, ``synchronize()``) are errors while
    capturing and end the capture as failed.
    """

    def __init__(self):
        self._g = _C._Graph()

    def capture_begin(self, pool=None, capture_error_mode="global"):
        """Starts capturing on the current stream (not the default one).

        `pool`: another graph's ``pool()`` or a ``graph_pool_handle()`` to
        share memory with. `capture_error_mode`: "global" (calls that are
        unsafe during a capture fail on any thread while it runs),
        "thread_local" (only on this thread) or "relaxed" (not checked).
        """
        if capture_error_mode not in _CAPTURE_MODES:
            raise ValueError("capture_error_mode must be one of %s, not %r"
                             % (", ".join(_CAPTURE_MODES), capture_error_mode))
        if pool is not None:
            pool = tuple(int(x) for x in pool)
            if len(pool) != 2:
                raise ValueError("pool must be a graph's pool() or graph_pool_handle()")
        dev = current_device()
        self._g.capture_begin(dev, _C._current_stream(dev), pool, capture_error_mode)

    def capture_end(self):
        """Ends the capture and makes the graph ready to replay. Raises
        RuntimeError, with the reason, if the capture failed."""
        if self._g.capture_end(True) == 0:
            import warnings
            warnings.warn("the NPU graph captured no work: was the work queued on "
                          "another stream than the capturing one?")

    def replay(self):
        """Runs the captured work on the current stream of the NPU it was
        captured on (whichever NPU is current, as CUDAGraph.replay)."""
        dev = self._g.device()
        if dev < 0:
            dev = current_device()  # nothing captured: replay says so
        self._g.replay(dev, _C._current_stream(dev))

    def reset(self):
        """Drops the graph and lets go of its memory pool."""
        self._g.reset()

    def pool(self):
        """The id of this graph's memory pool, to share with other captures."""
        return tuple(self._g.pool())

    def enable_debug_mode(self):
        """Accepted for torch's API: the graph is always kept for debug_dump()."""

    def debug_dump(self, debug_path):
        """Writes the graph in Graphviz dot form to `debug_path`."""
        self._g.debug_dump(os.fspath(debug_path))

    def _pool_stats(self):
        return dict(self._g.pool_stats())


class graph:
    """Captures the work of the block into `npu_graph` on a side stream
    (torch.npu.graph, torch.cuda.graph).

    Before the capture it synchronizes the device, collects garbage and
    empties the cache, so that memory freed by earlier work is not held by
    the graph's pool. `stream` defaults to one side stream per device.
    """

    _default_streams = {}

    def __init__(self, npu_graph, pool=None, stream=None, capture_error_mode="global"):
        if not isinstance(npu_graph, NPUGraph):
            raise TypeError("expected a torch_npurt.npu.NPUGraph, got %r" % (npu_graph,))
        if stream is None:
            dev = current_device()
            stream = graph._default_streams.get(dev)
            if stream is None:
                stream = graph._default_streams[dev] = Stream(dev)
        self.npu_graph = npu_graph
        self.pool = pool
        self.capture_stream = stream
        self.capture_error_mode = capture_error_mode
        self.stream_ctx = StreamContext(stream)

    def __enter__(self):
        synchronize()
        import gc
        gc.collect()
        empty_cache()
        self.stream_ctx.__enter__()
        try:
            self.npu_graph.capture_begin(self.pool, self.capture_error_mode)
        except BaseException:
            self.stream_ctx.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.npu_graph.capture_end()
            else:
                # The block's own exception says what went wrong.
                self.npu_graph._g.capture_end(False)
        finally:
            self.stream_ctx.__exit__(exc_type, exc, tb)
        return False


def make_graphed_callables(callables, sample_args, num_warmup_iters=3,
                           allow_unused_input=False, pool=None):
    """Graphed versions of modules or functions for inference.

    Each callable is run `num_warmup_iters` times on its sample args on a
    side stream, then captured; the returned callable copies its arguments
    into the graph's static inputs, replays, and returns the static outputs
    (replaced at the next call, as torch's). A module is returned itself,
    its forward replaced: the graph while the module is in the training
    mode it was captured in, its own forward otherwise (as torch's). A
    tuple of callables shares one pool and is captured in order.

    Only inference is graphed: the backward of an NPU graph cannot be
    captured (the autograd engine runs NPU backward work on the default
    stream, which cannot capture), so a sample arg or parameter that
    requires grad while grad is enabled is a RuntimeError; wrap the calls
    in ``torch.no_grad()`` or detach the inputs.
    """
    single = not isinstance(callables, tuple)
    if single:
        callables, sample_args = (callables,), (sample_args,)
    if len(callables) != len(sample_args):
        raise ValueError("callables and sample_args must have the same length")
    sample_args = tuple(a if isinstance(a, tuple) else (a,) for a in sample_args)
    all_params = tuple(tuple(fn.parameters()) if isinstance(fn, torch.nn.Module) else ()
                       for fn in callables)
    for args, params in zip(sample_args, all_params):
        if torch.is_grad_enabled() and any(
                t.requires_grad for t in args + params if isinstance(t, torch.Tensor)):
            raise RuntimeError(
                "make_graphed_callables: only inference is graphed on the NPU (the "
                "backward cannot be captured); run with torch.no_grad() or inputs and "
                "parameters that do not require grad")
        for a in args:
            if not isinstance(a, torch.Tensor):
                raise TypeError("sample_args must be tensors, got %r" % (type(a),))
    if pool is None:
        pool = graph_pool_handle()
    side = Stream()
    side.wait_stream(current_stream())
    graphed = []
    with stream(side):
        for fn, args in zip(callables, sample_args):
            for _ in range(num_warmup_iters):
                fn(*args)
    current_stream().wait_stream(side)
    for fn, args, params in zip(callables, sample_args, all_params):
        static_in = tuple(a.detach().clone() for a in args)
        g = NPUGraph()
        with graph(g, pool=pool, stream=side):
            static_out = fn(*static_in)
        graphed.append(_Graphed(fn, g, static_in, static_out, params))
    # As torch's: a module is returned itself, its forward replaced once
    # every callable is captured (one may call another).
    for i, (fn, call) in enumerate(zip(callables, graphed)):
        if isinstance(fn, torch.nn.Module):
            fn.forward = _graphed_forward(fn, fn.training, call, fn.forward)
            graphed[i] = fn
    return graphed[0] if single else tuple(graphed)


def _graphed_forward(module, training, call, original):
    """A graphed module's forward, as torch's: its graph while the module is
    in the training mode it was captured in, its own forward otherwise."""
    def forward(*args, **kwargs):
        if module.training != training:
            return original(*args, **kwargs)
        if kwargs:
            raise TypeError("the graphed module takes its inputs positionally, as "
                            "they were captured (got %s)" % sorted(kwargs))
        return call(*args)
    return forward


class _Graphed:
    def __init__(self, fn, g, static_in, static_out, params):
        self._fn = fn
        self._params = params
        self.graph = g
        self.static_inputs = static_in
        self.static_outputs = static_out

    def __call__(self, *args):
        if len(args) != len(self.static_inputs):
            raise TypeError("the graphed callable takes %d tensors, got %d"
                            % (len(self.static_inputs), len(args)))
        if torch.is_grad_enabled() and any(
                t.requires_grad for t in tuple(args) + self._params):
            raise RuntimeError(
                "the graphed callable runs inference only (its backward was not "
                "captured); call it under torch.no_grad()")
        for dst, src in zip(self.static_inputs, args):
            if src.shape != dst.shape or src.dtype != dst.dtype:
                raise ValueError("the graphed callable was captured for %s %s, got %s %s"
                                 % (tuple(dst.shape), dst.dtype, tuple(src.shape), src.dtype))
            if src.data_ptr() != dst.data_ptr():
                dst.copy_(src)
        self.graph.replay()
        return self.static_outputs



# --------------------------------------------------------------- call sites

def set_call_sites(enabled):
    """Whether each NPU op records the Python file and line that called it
    (for fault reports and the profiler). On by default; costs one brief
    GIL acquisition and a walk over a few frames per op
    (NPURT_TORCH_CALL_SITES=0 turns it off at start)."""
    _C._set_call_sites(bool(enabled))


def call_sites():
    return _C._call_sites()


class _Memory:
    """torch.npu.memory's (torch.cuda.memory's) snapshot calls, whose pickle
    https://pytorch.org/memory_viz reads: the pools' segments and blocks
    with each allocated block's Python line, and each device's history of
    allocations, frees and segments (device_traces) while recording."""

    _NEW = ("context", "stacks", "max_entries", "device", "clear_history")
    _LEGACY = ("record_context", "trace_alloc_max_entries", "trace_alloc_record_context",
               "device", "record_context_cpp")

    @staticmethod
    def _record_memory_history(enabled="all", *args, **kwargs):
        """torch 2.x's form: enabled "all" records the Python line of each
        allocation and the last max_entries (default: no limit) events of
        each device; "state" the lines only; None stops both. torch 1.13's:
        True/False with trace_alloc_max_entries (default 1). The lines use
        the same switch as set_call_sites, so they also name call sites in
        fault reports. Each call empties the history kept so far."""
        legacy = isinstance(enabled, bool)
        names = _Memory._LEGACY if legacy else _Memory._NEW
        if len(args) > len(names):
            raise TypeError("_record_memory_history takes at most %d arguments after "
                            "enabled" % len(names))
        opts = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in opts:
                raise TypeError("_record_memory_history got an unexpected or repeated "
                                "argument %r" % k)
            opts[k] = v
        if legacy:
            entries = opts.get("trace_alloc_max_entries", 1) if enabled else 0
        elif enabled in ("all", "state", None):
            entries = opts.get("max_entries", sys.maxsize) if enabled == "all" else 0
        else:
            raise ValueError("enabled must be \"all\", \"state\" or None (or torch 1.13's "
                             "True/False), not %r" % (enabled,))
        if isinstance(entries, bool) or not isinstance(entries, int) or entries < 0:
            raise ValueError("max_entries must be an int >= 0, not %r" % (entries,))
        _C._record_memory_history(entries)
        set_call_sites(enabled not in (None, False))

    @staticmethod
    def _snapshot(device=None):
        devices = range(device_count()) if device is None else [_index(device)]
        segments = [seg for i in devices for seg in memory_snapshot(i)]
        traces = []
        for i in range(device_count()):
            events = _C._memory_history(i) if i in devices else []
            for e in events:
                e["frames"] = _frames(e.pop("call_site"))
            traces.append(events)
        return {"segments": segments, "device_traces": traces}

    @staticmethod
    def _dump_snapshot(filename="dump_snapshot.pickle"):
        with open(filename, "wb") as f:
            pickle.dump(_Memory._snapshot(), f)




# ----------------------------------------------------------------- autocast

def get_amp_supported_dtype():
    """The dtypes torch.autocast("npu") casts to (torch's AMP asks the
    device module for them)."""
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation=True):
    """True: the NPU computes bfloat16 natively (`including_emulation`, of
    torch 2.x's signature, changes nothing)."""
    return True


def _need_autocast():
    if not _C._autocast_registered():
        raise RuntimeError(
            "autocast on the NPU needs torch >= 2.3 (this is torch %s, whose autocast "
            "knows only 'cuda' and 'cpu'); cast the model and inputs with .half() or "
            ".bfloat16() instead" % torch.__version__)


class _Amp:
    """torch.npu.amp, as torch_npu's: autocast() and GradScaler() for the NPU
    (torch.autocast("npu") and torch.amp.GradScaler("npu") on torch 2.x)."""

    # Classes, as torch.cuda.amp's: isinstance() and subclasses work.
    class autocast(torch.autocast):
        """torch.autocast("npu") with torch.cuda.amp.autocast's arguments."""

        def __init__(self, enabled=True, dtype=torch.float16, cache_enabled=True):
            _need_autocast()
            super().__init__(_DEVICE_TYPE, dtype=dtype, enabled=enabled,
                             cache_enabled=cache_enabled)

    if hasattr(torch.amp, "GradScaler"):
        class GradScaler(torch.amp.GradScaler):
            """torch.amp.GradScaler("npu") with torch.cuda.amp.GradScaler's
            arguments."""

            def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0,
                         backoff_factor=0.5, growth_interval=2000, enabled=True):
                _need_autocast()
                super().__init__(_DEVICE_TYPE, init_scale=init_scale,
                                 growth_factor=growth_factor,
                                 backoff_factor=backoff_factor,
                                 growth_interval=growth_interval, enabled=enabled)
    else:
        @staticmethod
        def GradScaler(*args, **kwargs):
            """Raises: this torch has no device-generic GradScaler."""
            _need_autocast()
            raise RuntimeError("torch %s has no torch.amp.GradScaler" % torch.__version__)

    @staticmethod
    def custom_fwd(fwd=None, *, cast_inputs=None):
        """torch.cuda.amp.custom_fwd's decorator for the NPU:
        torch.amp.custom_fwd(device_type="npu") (torch >= 2.4)."""
        _need_custom_amp("custom_fwd")
        return torch.amp.custom_fwd(fwd, device_type=_DEVICE_TYPE, cast_inputs=cast_inputs)

    @staticmethod
    def custom_bwd(bwd=None):
        """torch.cuda.amp.custom_bwd's decorator for the NPU:
        torch.amp.custom_bwd(device_type="npu") (torch >= 2.4)."""
        _need_custom_amp("custom_bwd")
        return torch.amp.custom_bwd(bwd, device_type=_DEVICE_TYPE)


def _need_custom_amp(name):
    _need_autocast()
    if not hasattr(torch.amp, name):
        raise RuntimeError("torch %s has no device-generic torch.amp.%s (torch >= 2.4)"
                           % (torch.__version__, name))




# -------------------------------------------------------------------- seeds

def manual_seed(seed):
    """Seeds the random numbers of NPU tensors.

    Random ops on NPU tensors (randn, dropout, ...) run through the CPU
    fallback and draw from torch's CPU generator, so this seeds that
    generator (the op set has no random-number op yet). Not through
    torch.manual_seed: on torch 2.x that calls this module's
    manual_seed_all.
    """
    torch.random.default_generator.manual_seed(int(seed))


manual_seed_all = manual_seed


def seed():
    """Seeds the generator NPU random ops draw from (torch's CPU generator,
    see manual_seed) with a random number."""
    torch.random.default_generator.seed()


seed_all = seed


def initial_seed():
    return torch.random.default_generator.initial_seed()


def get_rng_state(device=None):
    """The state of the generator NPU random ops draw from (torch's CPU
    generator, see manual_seed; `device` is checked, all NPUs share it)."""
    _index(device)
    return torch.random.default_generator.get_state()


def set_rng_state(new_state, device=None):
    _index(device)
    torch.random.default_generator.set_state(new_state)


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states):
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def _lazy_init():
    """torch 2.x calls it before the first use of the device type (its
    device_lazy_init): starts libnpurt, so that device-generic calls such
    as torch.accelerator.synchronize() know the NPUs are in use."""
    init()


def init():
    """Starts libnpurt now rather than at the first NPU call (as
    torch.cuda.init); raises RuntimeError if there is no NPU."""
    _C._current_device()


def is_initialized():
    return _C._runtime_started()

_forked_after_start = False


def _after_fork_in_child():
    global _forked_after_start
    _forked_after_start = _C._runtime_started()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _is_in_bad_fork():
    """True in a process forked after its parent started libnpurt: the
    child cannot use the NPUs (as CUDA's bad fork); torch.manual_seed asks
    before seeding the device."""
    return _forked_after_start


# ------------------------------------------------ legacy tensor types

class _TensorTypeMeta(type):
    """isinstance(t, torch.npu.FloatTensor): an NPU tensor of that dtype, as
    torch.cuda's legacy types answer."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Tensor) and obj.device.type == _DEVICE_TYPE and \
            obj.dtype == cls.dtype

    def __repr__(cls):
        return "<class 'torch.npu.%s'>" % cls.__name__


class _TensorType(metaclass=_TensorTypeMeta):
    """A legacy typed-tensor constructor (torch.cuda.FloatTensor's forms):
    ``T()`` is empty, ``T(2, 3)`` or ``T(torch.Size([2, 3]))`` uninitialised,
    ``T([1, 2])`` from data; on the current NPU, or `device`."""

    dtype = None
    is_npu = True

    def __new__(cls, *args, device=None):
        dev = torch_device(_index(device))
        if len(args) == 1 and not isinstance(args[0], int):
            data = args[0]
            if isinstance(data, torch.Size):
                return torch.empty(data, dtype=cls.dtype, device=dev)
            if isinstance(data, torch.Tensor):
                return data.to(device=dev, dtype=cls.dtype)
            return torch.tensor(data, dtype=cls.dtype, device=dev)
        if not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            raise TypeError("%s(): expected sizes (ints), a torch.Size, a sequence or a "
                            "tensor, got %r" % (cls.__name__, args))
        return torch.empty(args or (0,), dtype=cls.dtype, device=dev)


def _tensor_type(name, dtype):
    return _TensorTypeMeta(name, (_TensorType,), {"dtype": dtype, "__module__": "torch.npu"})


_TENSOR_TYPES = {
    "FloatTensor": torch.float32, "DoubleTensor": torch.float64, "HalfTensor": torch.float16,
    "BFloat16Tensor": torch.bfloat16, "ByteTensor": torch.uint8, "CharTensor": torch.int8,
    "ShortTensor": torch.int16, "IntTensor": torch.int32, "LongTensor": torch.int64,
    "BoolTensor": torch.bool,
}
for _name, _dtype in _TENSOR_TYPES.items():
    globals()[_name] = _tensor_type(_name, _dtype)
__all__ += list(_TENSOR_TYPES)


def _legacy_type(spec):
    """The legacy NPU type `spec` names (the class or "torch.npu.FloatTensor"),
    else None."""
    if isinstance(spec, _TensorTypeMeta):
        return spec
    if not isinstance(spec, str):
        return None
    # "torch.cuda.FloatTensor" too while transfer_to_npu is applied.
    prefixes = ("torch.npu.", "torch.cuda.") if _alias_device is not None else ("torch.npu.",)
    for prefix in prefixes:
        if spec.startswith(prefix) and spec[len(prefix):] in _TENSOR_TYPES:
            return globals()[spec[len(prefix):]]
    return None


# ------------------------------------------------------- torch_npu's knobs

def set_compile_mode(jit_compile=False):
    """torch_npu's switch between compiling operators at run time and its
    prebuilt binaries. The NPU's operators are fixed (the op set of
    libnpurt): nothing is compiled either way, so this only checks its
    argument, for scripts written for torch_npu."""
    if not isinstance(jit_compile, bool):
        raise TypeError("jit_compile must be a bool, not %r" % (jit_compile,))


class _Config:
    """torch.npu.config, as torch_npu's. allow_internal_format: torch_npu's
    private tensor layouts (NZ, ...); this NPU has none, so tensors keep
    torch's layouts whatever it is set to."""

    def __init__(self):
        self._internal = False

    @property
    def allow_internal_format(self):
        return self._internal

    @allow_internal_format.setter
    def allow_internal_format(self, value):
        if not isinstance(value, bool):
            raise TypeError("allow_internal_format must be a bool, not %r" % (value,))
        self._internal = value


config = _Config()


def ipc_collect():
    """torch.cuda.ipc_collect: frees the blocks of NPU tensors this process
    shared through torch.multiprocessing, dropped here since, that no other
    process uses any more (also done at the next share, by empty_cache()
    and before an allocation would fail)."""
    _C._ipc_collect()


# --------------------------------------------------------- submodules

# torch.cuda's submodules, as modules: `from torch.npu.amp import autocast`
# and `torch.npu.memory.memory_allocated()` work as with torch.cuda (the
# package also registers them as torch.npu.<name>).
_SUBMODULE_NAMES = {
    "amp": ("autocast", "GradScaler", "custom_fwd", "custom_bwd"),
    "memory": (
        "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
        "memory_cached", "max_memory_cached", "memory_stats", "memory_stats_as_nested_dict",
        "host_memory_stats", "memory_summary", "memory_snapshot", "reset_peak_memory_stats",
        "reset_accumulated_memory_stats", "reset_max_memory_allocated",
        "reset_max_memory_cached", "empty_cache", "mem_get_info",
        "set_per_process_memory_fraction", "get_per_process_memory_fraction",
        "list_gpu_processes", "get_allocator_backend", "caching_allocator_alloc",
        "caching_allocator_delete", "_set_allocator_settings", "_record_memory_history",
        "_snapshot", "_dump_snapshot"),
    "random": ("manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
               "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all"),
    "streams": ("Stream", "ExternalStream", "Event"),
    "graphs": ("NPUGraph", "graph", "graph_pool_handle", "is_current_stream_capturing",
               "make_graphed_callables"),
}


def _submodule(name, doc, source):
    mod = types.ModuleType(__name__ + "." + name, doc)
    for attr in _SUBMODULE_NAMES[name]:
        setattr(mod, attr, source(attr))
    mod.__all__ = [a for a in _SUBMODULE_NAMES[name] if not a.startswith("_")]
    sys.modules[mod.__name__] = mod
    return mod


amp = _submodule("amp", _Amp.__doc__, lambda a: getattr(_Amp, a))
memory = _submodule("memory", "torch.npu.memory: the pool's statistics and settings, and "
                    "the snapshots https://pytorch.org/memory_viz reads.",
                    lambda a: getattr(_Memory, a, None) or globals()[a])
random = _submodule("random", "torch.npu.random: the seeds and states NPU random ops use.",
                    globals().get)
streams = _submodule("streams", "torch.npu.streams: Stream, ExternalStream, Event.",
                     globals().get)
graphs = _submodule("graphs", "torch.npu.graphs: NPUGraph and its helpers.", globals().get)
