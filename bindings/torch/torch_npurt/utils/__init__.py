"""torch_npurt.utils: helpers beside the backend (torch_npu's names)."""
