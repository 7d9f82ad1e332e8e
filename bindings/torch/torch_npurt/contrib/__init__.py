"""torch_npurt.contrib: opt-in helpers, as torch_npu's contrib
(``from torch_npurt.contrib import transfer_to_npu``)."""
