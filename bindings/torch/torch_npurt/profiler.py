"""torch_npurt.npu.profiler: libnpurt's device profiler, with ATen op names.

While it runs, libnpurt records every task (queued, start and end on the
device clock, stream, engine, bytes) and the call site of the API call that
enqueued it; the backend gives each enqueue the ATen op it runs for
(``aten::mm``, ``aten::add``, ``aten::nll_loss (CPU fallback)`` for the
copies of a fallback) and the Python file and line that called the op.
``export_chrome_trace`` writes a Chrome/Perfetto trace (open it in
ui.perfetto.dev); each task's ``args.site`` reads
``train.py:42 in aten::mm()``.

    from torch_npurt.npu import profiler
    with profiler.profile("trace.json"):
        loss = model(x).sum()
    print(profiler.summary())

``start`` / ``stop`` / ``export_chrome_trace`` do the same by hand.
Recording is process-wide (all devices and threads). The Python line is
known when call sites are on (the default; ``set_call_sites(False)`` or
``NPURT_TORCH_CALL_SITES=0`` turns them off, ops are still named).
"""

import os

from . import _C

__all__ = ["start", "stop", "export_chrome_trace", "export", "summary", "profile"]


def start():
    """Starts recording device tasks."""
    _C._profiler_start()


def stop():
    """Stops recording; what was recorded stays for export."""
    _C._profiler_stop()


def export_chrome_trace(path):
    """Writes the records so far as a Chrome/Perfetto trace (JSON) at `path`."""
    path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise ValueError("export_chrome_trace needs a file path, got %r" % (path,))
    _C._profiler_export(path)


export = export_chrome_trace


def summary():
    """A table of device time per op kind, per stream and per engine."""
    return _C._profiler_summary()


class profile:
    """Context manager: records while inside; exports to `path` (if given)
    on exit, after waiting for the devices so every task has ended."""

    def __init__(self, path=None):
        self.path = path

    def __enter__(self):
        start()
        return self

    def __exit__(self, *exc):
        from . import npu
        try:
            for d in range(npu.device_count()):
                npu.synchronize(d)
        finally:
            stop()
        if self.path is not None:
            export_chrome_trace(self.path)
        return False

    def export_chrome_trace(self, path):
        export_chrome_trace(path)

    def summary(self):
        return summary()
