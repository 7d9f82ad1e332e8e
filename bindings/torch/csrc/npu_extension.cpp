// npu_extension.cpp - what C++ extensions reach through the dispatcher
// (include/torch_npurt/extension.h, header only): they do not link against
// this module, so the calls they need are operators of the torch_npurt
// namespace, also callable as torch.ops.torch_npurt.*.
#include <torch/library.h>

#include "npu_runtime.h"

#include <cstdint>

namespace torch_npurt {

int64_t streamHandle(int64_t device, int64_t id)
{
	return static_cast<int64_t>(
	        reinterpret_cast<intptr_t>(nativeStream(streamFromIds(device, id))));
}

TORCH_LIBRARY(torch_npurt, m)
{
	m.def("_stream_handle(int device, int stream_id) -> int", &streamHandle);
}

}  // namespace torch_npurt
