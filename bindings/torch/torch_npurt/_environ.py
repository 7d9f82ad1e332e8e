"""torch_npu's environment variables, for scripts and launchers written for
it, read by libnpurt under its own names when it starts (at the first NPU
call): set them before `import torch_npurt`. libnpurt's names win when both
are set. (CANN's ASCEND_RT_VISIBLE_DEVICES libnpurt reads itself.)"""

_NAMES = {
    # The pool's settings (PYTORCH_CUDA_ALLOC_CONF's syntax).
    "PYTORCH_NPU_ALLOC_CONF": "NPURT_ALLOC_CONF",
}


def translate_torch_npu_environment(environ):
    """Sets libnpurt's name of each torch_npu variable in `environ` (a
    mapping such as os.environ) that libnpurt's own does not override."""
    for theirs, ours in _NAMES.items():
        if theirs in environ and ours not in environ:
            environ[ours] = environ[theirs]
