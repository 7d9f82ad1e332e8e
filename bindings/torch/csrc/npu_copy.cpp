// npu_copy.cpp - allocation, copies, fills, casts and views of NPU tensors,
// and their ATen kernels (empty*, _copy_from*, fill_, zero_, as_strided,
// view, _reshape_alias, unfold, view_as_real, view_as_complex, resize_, set_,
// _has_compatible_shallow_copy_type; _copy_from* of conjugate and negative
// views).
#include "npu_ops.h"

#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <typeinfo>
#include <vector>

namespace torch_npurt {

namespace {

npurtStream_t streamOf(int device)
{
	return currentNative(device);
}

c10::DispatchKeySet npuKeys()
{
	return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
}

}  // namespace

at::Tensor emptyNpu(at::IntArrayRef sizes, at::ScalarType dtype, int device)
{
	DeviceScope scope(device);
	return at::detail::empty_generic(sizes, allocator(), npuKeys(), dtype, c10::nullopt);
}

bool toNpurtType(at::ScalarType t, npurtDataType *out)
{
	switch (t) {
	case at::kFloat:
		*out = npurtFloat32;
		return true;
	case at::kHalf:
		*out = npurtFloat16;
		return true;
	case at::kBFloat16:
		*out = npurtBFloat16;
		return true;
	case at::kInt:
		*out = npurtInt32;
		return true;
	default:
		return false;
	}
}

void launchOp(const npurtOpDesc &desc, int device, const char *what)
{
	DeviceScope scope(device);
	enqueueSite(what);
	check(npurtLaunchOp(&desc, streamOf(device)), what);
}

void copyBytes(void *dst, const void *src, size_t n, npurtMemcpyKind kind, int device,
               bool nonBlocking)
{
	if (!n)
		return;
	bool blocking = !nonBlocking && kind != npurtMemcpyDeviceToDevice;
	if (blocking)
		checkSync(kind == npurtMemcpyDeviceToHost ? "copy from NPU to CPU"
		                                          : "copy from CPU to NPU");
	DeviceScope scope(device);
	npurtStream_t s = streamOf(device);
	enqueueSite("aten::copy_");
	check(npurtMemcpyAsync(dst, src, n, kind, s), "npurtMemcpyAsync");
	// As CUDA's copy_: a blocking copy is complete when it returns.
	if (blocking)
		check(npurtStreamSynchronize(s), "npurtStreamSynchronize");
}

namespace {

// Sizes and element strides of dst and src with size-1 dimensions dropped
// and dimensions merged where both tensors are contiguous across them.
struct Layout {
	std::vector<int64_t> size, sd, ss;
};

Layout coalesce(const at::Tensor &dst, const at::Tensor &src)
{
	Layout l;
	for (int64_t i = 0; i < dst.dim(); i++) {
		int64_t n = dst.size(i);
		if (n == 1)
			continue;
		int64_t d = dst.stride(i), s = src.stride(i);
		if (!l.size.empty() && l.sd.back() == d * n && l.ss.back() == s * n) {
			l.size.back() *= n;
			l.sd.back() = d;
			l.ss.back() = s;
			continue;
		}
		l.size.push_back(n);
		l.sd.push_back(d);
		l.ss.push_back(s);
	}
	if (l.size.empty()) {
		l.size = {1};
		l.sd = {1};
		l.ss = {1};
	}
	return l;
}

// The element range [lo, hi] of a view's storage that it touches.
void span(const at::Tensor &t, int64_t *lo, int64_t *hi)
{
	*lo = t.storage_offset();
	*hi = *lo;
	for (int64_t i = 0; i < t.dim(); i++)
		*hi += (t.size(i) - 1) * t.stride(i);
}

// A CPU copy of the part of an NPU view's storage it spans, viewed with
// the same sizes and strides.
at::Tensor spanToHost(const at::Tensor &t, int64_t *lo)
{
	int64_t hi = 0;
	span(t, lo, &hi);
	at::Tensor buf = at::empty({hi - *lo + 1}, t.options().device(at::kCPU));
	const char *base = static_cast<const char *>(t.storage().data());
	copyBytes(buf.data_ptr(), base + *lo * t.element_size(), buf.nbytes(),
	          npurtMemcpyDeviceToHost, deviceOf(t), false);
	return buf.as_strided(t.sizes(), t.strides(), t.storage_offset() - *lo);
}

void d2d(void *dst, const void *src, size_t n, int device, const char *what = "aten::copy_")
{
	if (!n)
		return;
	enqueueSite(what);
	check(npurtMemcpyAsync(dst, src, n, npurtMemcpyDeviceToDevice, streamOf(device)),
	      "npurtMemcpyAsync");
}

// One strided copy on the device: sizes in elements, strides in bytes.
void strided(void *dst, const std::vector<size_t> &dstStrides, const void *src,
             const std::vector<size_t> &srcStrides, const std::vector<size_t> &sizes, size_t es,
             int device, const char *what = "aten::copy_")
{
	enqueueSite(what);
	check(npurtMemcpyStridedAsync(dst, dstStrides.data(), src, srcStrides.data(), sizes.data(),
	                              static_cast<int>(sizes.size()), es, npurtMemcpyDeviceToDevice,
	                              streamOf(device)),
	      "npurtMemcpyStridedAsync");
}

}  // namespace

void copyOnDevice(const at::Tensor &dst, const at::Tensor &src)
{
	TORCH_INTERNAL_ASSERT(dst.sizes() == src.sizes() && dst.dtype() == src.dtype());
	TORCH_INTERNAL_ASSERT(deviceOf(dst) == deviceOf(src));
	if (dst.numel() == 0)
		return;
	int dev = deviceOf(dst);
	DeviceScope scope(dev);
	if (dst.is_contiguous() && src.is_contiguous()) {
		d2d(dataPtr(dst), dataPtr(src), dst.nbytes(), dev);
		return;
	}
	// The runtime's strided copy (one task; overlapping views gathered
	// first) takes NPURT_MAX_COPY_DIMS dimensions: merged ones count once,
	// and beyond that the outermost dimension is walked here.
	Layout l = coalesce(dst, src);
	if (l.size.size() > NPURT_MAX_COPY_DIMS) {
		at::Tensor d = dst.as_strided(l.size, l.sd, dst.storage_offset());
		at::Tensor s = src.as_strided(l.size, l.ss, src.storage_offset());
		for (int64_t i = 0; i < l.size[0]; i++)
			copyOnDevice(d.select(0, i), s.select(0, i));
		return;
	}
	size_t es = dst.element_size();
	std::vector<size_t> sizes, ds, ss;
	for (size_t i = 0; i < l.size.size(); i++) {
		sizes.push_back(static_cast<size_t>(l.size[i]));
		ds.push_back(static_cast<size_t>(l.sd[i]) * es);
		ss.push_back(static_cast<size_t>(l.ss[i]) * es);
	}
	strided(dataPtr(dst), ds, dataPtr(src), ss, sizes, es, dev);
}

at::Tensor contiguousOnDevice(const at::Tensor &src)
{
	if (src.is_contiguous())
		return src;
	at::Tensor out = emptyNpu(src.sizes(), src.scalar_type(), deviceOf(src));
	copyOnDevice(out, src);
	return out;
}

void fillOnDevice(const at::Tensor &t, const at::Scalar &value)
{
	if (t.numel() == 0)
		return;
	int dev = deviceOf(t);
	if (!t.is_contiguous()) {
		// Fill one element, broadcast it into place.
		at::Tensor one = emptyNpu({1}, t.scalar_type(), dev);
		fillOnDevice(one, value);
		copyOnDevice(t, one.expand(t.sizes()));
		return;
	}
	// The value's bytes in t's dtype, converted as torch converts.
	at::Tensor v = at::scalar_tensor(value, at::TensorOptions().dtype(t.scalar_type()));
	size_t es = t.element_size();
	const unsigned char *b = static_cast<const unsigned char *>(v.data_ptr());
	DeviceScope scope(dev);
	enqueueSite("aten::fill_");
	npurtStream_t st = streamOf(dev);
	uint16_t v16 = 0;
	uint32_t v32 = 0, hi = 0;
	switch (es) {
	case 1:
		check(npurtMemsetAsync(dataPtr(t), b[0], t.nbytes(), st), "npurtMemsetAsync");
		return;
	case 2:
		std::memcpy(&v16, b, 2);
		check(npurtMemsetD16Async(dataPtr(t), v16, t.numel(), st), "npurtMemsetD16Async");
		return;
	case 4:
		std::memcpy(&v32, b, 4);
		check(npurtMemsetD32Async(dataPtr(t), v32, t.numel(), st), "npurtMemsetD32Async");
		return;
	default:
		break;
	}
	std::memcpy(&v32, b, 4);
	std::memcpy(&hi, b + 4, 4);
	if (es == 8 && v32 == hi) {  // 0, -1, ...: a 32-bit pattern
		check(npurtMemsetD32Async(dataPtr(t), v32, t.numel() * 2, st),
		      "npurtMemsetD32Async");
		return;
	}
	// Other 8-byte values: the first element from the host, then copies
	// doubling the filled prefix (log2(n) engine tasks of plain copies).
	char *p = static_cast<char *>(dataPtr(t));
	check(npurtMemcpyAsync(p, b, es, npurtMemcpyHostToDevice, st), "npurtMemcpyAsync");
	for (size_t done = es, total = t.nbytes(); done < total;) {
		size_t n = std::min(done, total - done);
		check(npurtMemcpyAsync(p + done, p, n, npurtMemcpyDeviceToDevice, st),
		      "npurtMemcpyAsync");
		done += n;
	}
}

bool castIsNative(at::ScalarType from, at::ScalarType to)
{
	auto isFloat = [](at::ScalarType t) {
		return t == at::kFloat || t == at::kHalf || t == at::kBFloat16;
	};
	// The op set rounds float -> int32 to nearest, torch truncates: no.
	return (isFloat(from) || from == at::kInt) && isFloat(to);
}

void castOnDevice(const at::Tensor &dst, const at::Tensor &src)
{
	TORCH_INTERNAL_ASSERT(dst.sizes() == src.sizes());
	if (dst.numel() == 0)
		return;
	at::ScalarType from = src.scalar_type(), to = dst.scalar_type();
	if (from == to) {
		copyOnDevice(dst, src);
		return;
	}
	int dev = deviceOf(dst);
	if (!castIsNative(from, to)) {
		countFallback(std::string("_to_copy (") + c10::toString(from) + " -> " +
		              c10::toString(to) + " through the host)");
		int64_t lo = 0;
		at::Tensor h = spanToHost(src, &lo).to(to).contiguous();
		if (dst.is_contiguous()) {
			copyBytes(dataPtr(dst), h.data_ptr(), h.nbytes(), npurtMemcpyHostToDevice,
			          dev, false);
		} else {
			at::Tensor tmp = emptyNpu(dst.sizes(), to, dev);
			copyBytes(dataPtr(tmp), h.data_ptr(), h.nbytes(), npurtMemcpyHostToDevice,
			          dev, false);
			copyOnDevice(dst, tmp);
		}
		return;
	}
	// torch converts int32 to half types through float (rounding twice);
	// the op set rounds once, so go through float32 too.
	if (from == at::kInt && to != at::kFloat) {
		at::Tensor f = emptyNpu(src.sizes(), at::kFloat, dev);
		castOnDevice(f, src);
		castOnDevice(dst, f);
		return;
	}
	at::Tensor s = contiguousOnDevice(src);
	at::Tensor d = dst.is_contiguous() ? dst : emptyNpu(dst.sizes(), to, dev);
	npurtOpDesc desc{};
	desc.op = npurtOpCast;
	toNpurtType(from, &desc.dtype);
	toNpurtType(to, &desc.outDtype);
	// Operands are at most 1 GiB: cast in chunks.
	int64_t chunk = (int64_t(1) << 30) / 4;
	for (int64_t off = 0; off < s.numel(); off += chunk) {
		desc.n = std::min(chunk, s.numel() - off);
		desc.a = static_cast<const char *>(dataPtr(s)) + off * s.element_size();
		desc.out = static_cast<char *>(dataPtr(d)) + off * d.element_size();
		launchOp(desc, dev, "aten::_to_copy");
	}
	if (!d.is_same(dst))
		copyOnDevice(dst, d);
}

namespace {

// ----------------------------------------------------------- ATen kernels

void checkFactoryArgs(c10::optional<at::Layout> layout, c10::optional<bool> pinMemory)
{
	TORCH_CHECK(!layout || *layout == at::kStrided, "NPU tensors are strided; layout ", *layout,
	            " is not supported");
	TORCH_CHECK(!pinMemory || !*pinMemory, "pin_memory is for CPU tensors, not NPU ones");
}

int factoryDevice(c10::optional<at::Device> device)
{
	return checkedDevice(device && device->has_index() ? device->index() : -1);
}

at::Tensor empty_memory_format(at::IntArrayRef size, c10::optional<at::ScalarType> dtype,
                               c10::optional<at::Layout> layout, c10::optional<at::Device> device,
                               c10::optional<bool> pinMemory,
                               c10::optional<at::MemoryFormat> memoryFormat)
{
	checkFactoryArgs(layout, pinMemory);
	DeviceScope scope(factoryDevice(device));
	return at::detail::empty_generic(size, allocator(), npuKeys(),
	                                 dtype.value_or(at::get_default_dtype_as_scalartype()),
	                                 memoryFormat);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         c10::optional<at::ScalarType> dtype, c10::optional<at::Layout> layout,
                         c10::optional<at::Device> device, c10::optional<bool> pinMemory)
{
	checkFactoryArgs(layout, pinMemory);
	DeviceScope scope(factoryDevice(device));
	return at::detail::empty_strided_generic(
	        size, stride, allocator(), npuKeys(),
	        dtype.value_or(at::get_default_dtype_as_scalartype()));
}

// Copies between two NPUs: contiguous on each side, the destination's
// stream waits for the source's work and the source's stream for the copy
// (so the source's memory is not reused under it).
void copyAcrossDevices(const at::Tensor &dst, const at::Tensor &src)
{
	int sdev = deviceOf(src), ddev = deviceOf(dst);
	at::Tensor s = contiguousOnDevice(src);
	if (s.scalar_type() != dst.scalar_type()) {
		at::Tensor c = emptyNpu(s.sizes(), dst.scalar_type(), sdev);
		castOnDevice(c, s);
		s = c;
	}
	at::Tensor d = dst.is_contiguous() ? dst : emptyNpu(dst.sizes(), dst.scalar_type(), ddev);
	auto *impl = c10::impl::getDeviceGuardImpl(kNpu);
	void *ev = nullptr;
	impl->record(&ev, currentStream(sdev), sdev, c10::EventFlag::PYTORCH_DEFAULT);
	impl->block(ev, currentStream(ddev));
	if (d.nbytes()) {
		// On the destination's copy engine, reading the source NPU's
		// memory in place (libnpurt maps it: no host bounce, no wait).
		DeviceScope scope(ddev);
		enqueueSite("aten::copy_ (NPU to NPU)");
		check(npurtMemcpyPeerAsync(dataPtr(d), ddev, dataPtr(s), sdev, d.nbytes(),
		                           streamOf(ddev)),
		      "npurtMemcpyPeerAsync");
	}
	void *back = nullptr;
	impl->record(&back, currentStream(ddev), ddev, c10::EventFlag::PYTORCH_DEFAULT);
	impl->block(back, currentStream(sdev));
	impl->destroyEvent(ev, sdev);
	impl->destroyEvent(back, ddev);
	if (!d.is_same(dst))
		copyOnDevice(dst, d);
}

at::Tensor copy_from(const at::Tensor &self, const at::Tensor &dst, bool nonBlocking)
{
	// copy_ hands over src before broadcasting it.
	at::Tensor src = self.sizes() == dst.sizes() ? self : self.expand(dst.sizes());
	if (dst.numel() == 0)
		return dst;
	// torch's copy_ checks this for its own devices only (ours reach
	// _copy_from first); CUDA refuses it too.
	at::assert_no_internal_overlap(dst);
	OpScope op("aten::copy_");
	if (src.is_cpu() && isNpu(dst)) {
		// Pinned, contiguous and of dst's dtype: h is src itself, and a
		// non-blocking copy is asynchronous (the engine reads the pinned
		// block later: libnpurt keeps it until then). Otherwise h is a pageable
		// temporary, which libnpurt stages before the call returns.
		at::Tensor h = src.to(dst.scalar_type()).contiguous();
		int dev = deviceOf(dst);
		if (dst.is_contiguous()) {
			copyBytes(dataPtr(dst), h.data_ptr(), h.nbytes(), npurtMemcpyHostToDevice,
			          dev, nonBlocking);
		} else {
			at::Tensor tmp = emptyNpu(dst.sizes(), dst.scalar_type(), dev);
			copyBytes(dataPtr(tmp), h.data_ptr(), h.nbytes(), npurtMemcpyHostToDevice,
			          dev, false);
			copyOnDevice(dst, tmp);
		}
		return dst;
	}
	if (isNpu(src) && dst.is_cpu()) {
		at::Tensor s = contiguousOnDevice(src);
		int dev = deviceOf(s);
		if (dst.is_contiguous() && dst.scalar_type() == s.scalar_type()) {
			// Into pinned memory, a non-blocking copy is asynchronous (as
			// in CUDA, dst is ready once the stream has run it); into
			// pageable memory libnpurt returns when the data has arrived.
			copyBytes(dst.data_ptr(), dataPtr(s), s.nbytes(), npurtMemcpyDeviceToHost,
			          dev, nonBlocking);
		} else {
			at::Tensor h = at::empty(s.sizes(), s.options().device(at::kCPU));
			copyBytes(h.data_ptr(), dataPtr(s), s.nbytes(), npurtMemcpyDeviceToHost,
			          dev, false);
			dst.copy_(h);
		}
		return dst;
	}
	TORCH_CHECK(isNpu(src) && isNpu(dst), "torch_npurt: cannot copy from ", src.device(),
	            " to ", dst.device());
	if (deviceOf(src) != deviceOf(dst)) {
		copyAcrossDevices(dst, src);
		return dst;
	}
	// x[i] = x[i] writes a view onto itself: nothing to do. Other overlaps
	// read the source before anything is written. (Only for one storage:
	// get_overlap_status says "too hard" for any expanded source.)
	if (src.storage().data() == dst.storage().data()) {
		if (dataPtr(src) == dataPtr(dst) && src.strides() == dst.strides() &&
		    src.scalar_type() == dst.scalar_type())
			return dst;
		int64_t slo, shi, dlo, dhi;
		span(src, &slo, &shi);
		span(dst, &dlo, &dhi);
		if (slo * int64_t(src.element_size()) <=
		            (dhi + 1) * int64_t(dst.element_size()) - 1 &&
		    dlo * int64_t(dst.element_size()) <=
		            (shi + 1) * int64_t(src.element_size()) - 1) {
			at::Tensor c = emptyNpu(src.sizes(), src.scalar_type(), deviceOf(src));
			copyOnDevice(c, src);
			src = c;
		}
	}
	if (src.scalar_type() != dst.scalar_type())
		castOnDevice(dst, src);
	else
		copyOnDevice(dst, src);
	return dst;
}

// The CPU fallback's out= arguments: resized as torch resizes outputs
// (with its warning when a non-empty one had another shape).
at::Tensor copy_from_and_resize(const at::Tensor &self, const at::Tensor &dst)
{
	at::native::resize_output(dst, self.sizes());
	return copy_from(self, dst, false);
}

// t's stored values: an alias of t without its conjugate and negative bits.
at::Tensor storedValues(const at::Tensor &t)
{
	if (!t.is_conj() && !t.is_neg())
		return t;
	at::Tensor v = at::alias(t);
	v._set_conj(false);
	v._set_neg(false);
	return v;
}

// A copy from or into a tensor with a conjugate or negative bit (x.conj()
// of a complex tensor, .mH, torch._neg_view). torch's math-bit fallback
// would resolve the bit with clone(), whose copy_ comes back to _copy_from
// on a device other than CPU and CUDA: the recursion only ended in a stack
// overflow. As copy_ does on CPU and CUDA: copy the stored values, then
// apply to dst's what the bits differ by.
at::Tensor copy_from_math_bits(const at::Tensor &self, const at::Tensor &dst, bool nonBlocking)
{
	// (A real dst of a complex source keeps the real parts: no conjugate.)
	bool conj = self.is_conj() != dst.is_conj() && dst.is_complex();
	bool neg = self.is_neg() != dst.is_neg();
	at::Tensor d = storedValues(dst);
	// The fix-up below reads dst: on the host, not before the data is there.
	at::_copy_from(storedValues(self), d, nonBlocking && !((conj || neg) && d.is_cpu()));
	// conj_physical_ has no kernel for devices other than CPU and CUDA:
	// negate the imaginary parts.
	if (conj)
		at::view_as_real(d).select(-1, 1).neg_();
	if (neg)
		d.neg_();
	return dst;
}

at::Tensor copy_from_and_resize_math_bits(const at::Tensor &self, const at::Tensor &dst)
{
	at::native::resize_output(dst, self.sizes());
	return copy_from_math_bits(self, dst, false);
}

at::Tensor &fill_scalar(at::Tensor &self, const at::Scalar &value)
{
	OpScope op("aten::fill_");
	fillOnDevice(self, value);
	return self;
}

at::Tensor &fill_tensor(at::Tensor &self, const at::Tensor &value)
{
	TORCH_CHECK(value.dim() == 0,
	            "fill_ only supports 0-dimension value tensor but got tensor with ",
	            value.dim(), " dimensions.");
	OpScope op("aten::fill_");
	fillOnDevice(self, value.item());
	return self;
}

at::Tensor &zero(at::Tensor &self)
{
	OpScope op("aten::zero_");
	fillOnDevice(self, 0);
	return self;
}

}  // namespace

void resizeStorageBytes(c10::StorageImpl *st, size_t nbytes, int device)
{
	OpScope op("aten::resize_");
	TORCH_CHECK(st->resizable(), "Trying to resize storage that is not resizable");
	c10::Allocator *alloc = st->allocator();
	TORCH_CHECK(alloc, "Trying to resize storage without an allocator");
	DeviceScope scope(device);
	c10::DataPtr fresh = alloc->allocate(nbytes);
	size_t old = st->nbytes();
	if (old && st->data())
		d2d(fresh.get(), st->data(), std::min(old, nbytes), device);
	st->set_data_ptr_noswap(std::move(fresh));
	st->set_nbytes(nbytes);
}

namespace {

// Grows the storage like CUDA's resize_.
void growStorage(const at::Tensor &self, size_t nbytes)
{
	resizeStorageBytes(self.storage().unsafeGetStorageImpl(), nbytes, deviceOf(self));
}

const at::Tensor &resize(const at::Tensor &self, at::IntArrayRef size,
                         c10::optional<at::MemoryFormat> memoryFormat)
{
	TORCH_CHECK(!self.has_names(), "resize_ is not allowed on a named tensor");
	for (int64_t s : size)
		TORCH_CHECK(s >= 0, "resize_: negative size ", s, " in ", size);
	auto *impl = self.unsafeGetTensorImpl();
	impl->set_sizes_contiguous(size);
	auto fmt = memoryFormat.value_or(at::MemoryFormat::Contiguous);
	TORCH_CHECK(fmt != at::MemoryFormat::Preserve, "Unsupported memory format ", fmt);
	if (fmt != at::MemoryFormat::Contiguous)
		impl->empty_tensor_restride(fmt);
	size_t need = at::detail::computeStorageNbytes(size, self.strides(), self.element_size(),
	                                               self.storage_offset());
	if (self.numel() > 0 && need > self.storage().nbytes())
		growStorage(self, need);
	return self;
}

at::Tensor &set_storage(at::Tensor &self, at::Storage source, int64_t offset, at::IntArrayRef size,
                        at::IntArrayRef stride)
{
	at::native::checkSetStorage(self, source, offset, size, stride);
	self.unsafeGetTensorImpl()->set_storage_offset(offset);
	c10::optional<at::IntArrayRef> st =
	        stride.data() ? c10::make_optional(stride) : c10::nullopt;
	if (st) {
		at::native::setStrided(self, size, stride, offset);
	} else {
		self.unsafeGetTensorImpl()->set_sizes_contiguous(size);
		at::native::setStrided(self, size, self.strides(), offset);
	}
	return self;
}

at::Tensor &set_source_storage(at::Tensor &self, at::Storage source)
{
	int64_t n = source.nbytes() / self.element_size();
	return set_storage(self, source, 0, {n}, {});
}

at::Tensor &set_source_tensor(at::Tensor &self, const at::Tensor &source)
{
	if (self.is_same(source))
		return self;
	return set_storage(self, source.storage(), source.storage_offset(), source.sizes(),
	                   source.strides());
}

at::Tensor &set_empty(at::Tensor &self)
{
	c10::Storage empty(c10::Storage::use_byte_size_t(), 0, allocator(), true);
	return set_storage(self, empty, 0, {0}, {});
}

// A plain strided tensor of the CPU or an NPU: TensorImpl itself, no
// wrapper or sparse or quantized kind.
bool plainDense(const at::Tensor &t)
{
	const c10::DispatchKeySet ks = t.key_set();
	return (ks.has(c10::DispatchKey::CPU) || ks.has(c10::DispatchKey::PrivateUse1)) &&
	       t.layout() == at::kStrided && !t.is_quantized() &&
	       typeid(*t.unsafeGetTensorImpl()) == typeid(c10::TensorImpl);
}

// Whether `from`'s TensorImpl may be copied into `self`'s. torch answers
// yes for dense CPU and CUDA tensors but knows no PrivateUse1 device, so
// `param.data = param.to("npu")` (FSDP, torch_npu scripts) failed, and
// Module.to("npu") made new Parameters where .cuda() keeps them (an
// optimizer made before the move then updated the CPU copies).
bool has_compatible_shallow_copy_type(const at::Tensor &self, const at::Tensor &from)
{
	return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) ||
	       (plainDense(self) && plainDense(from));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
	m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
	m.impl("empty_strided", TORCH_FN(empty_strided));
	m.impl("_copy_from", TORCH_FN(copy_from));
	m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
	m.impl("fill_.Scalar", TORCH_FN(fill_scalar));
	m.impl("fill_.Tensor", TORCH_FN(fill_tensor));
	m.impl("zero_", TORCH_FN(zero));
	// Views: ATen's own implementations only touch metadata, so they are
	// right for any device; through the fallback they would copy.
	m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
	m.impl("view", TORCH_FN(at::native::view));
	m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
	m.impl("unfold", TORCH_FN(at::native::unfold));
	m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
	m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
	m.impl("resize_", TORCH_FN(resize));
	m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
	m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
	m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
	m.impl("set_", TORCH_FN(set_empty));
}

namespace {
void mathBitCopies(torch::Library &m)
{
	m.impl("_copy_from", TORCH_FN(copy_from_math_bits));
	m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize_math_bits));
}
}  // namespace

TORCH_LIBRARY_IMPL(aten, Conjugate, m)
{
	mathBitCopies(m);
}

TORCH_LIBRARY_IMPL(aten, Negative, m)
{
	mathBitCopies(m);
}

}  // namespace torch_npurt
