// npu_python.cpp - the torch_npurt._C module: what torch_npurt.npu (Python)
// needs from the runtime. Streams cross the boundary as (device, id) pairs,
// the ids of npu_runtime.h; the Python classes wrap them.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/extension.h>

#include "npu_runtime.h"

namespace py = pybind11;

namespace torch_npurt {

namespace {

c10::Stream streamFromIds(int device, int64_t id)
{
	return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, checkedDevice(device)), id);
}

// An event of the Python API: its own flags (timing is opt-in in
// torch_npu's Event(enable_timing=...)), recorded on any stream of its
// device.
class PyEvent {
public:
	PyEvent(bool timing, bool blocking) : timing_(timing), blocking_(blocking) {}
	~PyEvent()
	{
		if (ev_)
			npurtEventDestroy(ev_);
	}
	PyEvent(const PyEvent &) = delete;
	PyEvent &operator=(const PyEvent &) = delete;

	void record(int device, int64_t id)
	{
		c10::Stream s = streamFromIds(device, id);
		DeviceScope scope(device);
		if (!ev_) {
			unsigned flags = (timing_ ? npurtEventTiming : npurtEventDisableTiming) |
			                 (blocking_ ? npurtEventBlockingSync : 0);
			check(npurtEventCreateWithFlags(&ev_, flags), "npurtEventCreateWithFlags");
			device_ = device;
		}
		TORCH_CHECK(device == device_, "Event was recorded on NPU ", device_,
		            " before; it cannot be recorded on NPU ", device);
		check(npurtEventRecord(ev_, nativeStream(s)), "npurtEventRecord");
	}

	void wait(int device, int64_t id)
	{
		if (!ev_)
			return;  // never recorded: complete
		c10::Stream s = streamFromIds(device, id);
		DeviceScope scope(device);
		check(npurtStreamWaitEvent(nativeStream(s), ev_, 0), "npurtStreamWaitEvent");
	}

	bool query()
	{
		if (!ev_)
			return true;
		npurtError_t err = npurtEventQuery(ev_);
		if (err == npurtErrorNotReady)
			return false;
		check(err, "npurtEventQuery");
		return true;
	}

	void synchronize()
	{
		if (!ev_)
			return;
		py::gil_scoped_release nogil;
		check(npurtEventSynchronize(ev_), "npurtEventSynchronize");
	}

	double elapsed(PyEvent &end)
	{
		TORCH_CHECK(timing_ && end.timing_,
		            "Both events must be created with enable_timing=True to measure the "
		            "time between them");
		TORCH_CHECK(ev_ && end.ev_, "Both events must be recorded before calculating "
		                            "elapsed time");
		float ms = 0;
		check(npurtEventElapsedTime(&ms, ev_, end.ev_), "npurtEventElapsedTime");
		return ms;
	}

	int device() const { return device_; }

private:
	npurtEvent_t ev_ = nullptr;
	bool timing_, blocking_;
	int device_ = -1;
};

py::dict memStats(int device)
{
	DeviceScope scope(checkedDevice(device));
	npurtMemStats s{};
	check(npurtMemGetStats(&s), "npurtMemGetStats");
	py::dict d;
	d["allocated_bytes.all.current"] = s.allocatedBytes;
	d["allocated_bytes.all.peak"] = s.allocatedBytesPeak;
	d["reserved_bytes.all.current"] = s.reservedBytes;
	d["reserved_bytes.all.peak"] = s.reservedBytesPeak;
	d["active.all.current"] = s.activeBlocks;
	d["active.all.peak"] = s.activeBlocksPeak;
	d["inactive_split_bytes.all.current"] = s.inactiveSplitBytes;
	d["inactive_split_bytes.all.peak"] = s.inactiveSplitBytesPeak;
	d["segment.all.allocated"] = s.deviceAllocs;
	d["segment.all.freed"] = s.deviceFrees;
	d["num_ooms"] = s.ooms;
	d["num_alloc_retries"] = s.cacheFlushes;
	d["allocation.all.allocated"] = s.allocCalls;
	d["allocation.all.freed"] = s.freeCalls;
	return d;
}

py::dict deviceProperties(int device)
{
	npurtDeviceProp p{};
	check(npurtGetDeviceProperties(&p, checkedDevice(device)), "npurtGetDeviceProperties");
	py::dict d;
	d["name"] = std::string(p.name);
	d["device_path"] = std::string(p.devicePath);
	d["total_memory"] = p.totalGlobalMem;
	d["copy_engine_count"] = p.copyEngineCount;
	d["compute_engine_count"] = p.computeEngineCount;
	d["clock_rate_hz"] = p.clockRateHz;
	d["driver_api_version"] = p.driverApiVersion;
	d["emulated"] = p.emulated != 0;
	return d;
}

}  // namespace

}  // namespace torch_npurt

PYBIND11_MODULE(_C, m)
{
	using namespace torch_npurt;
	m.doc() = "torch_npurt native part: the PrivateUse1 backend over libnpurt";

	// Errors of this module's own functions become the Python exceptions
	// torch raises for the same C++ errors.
	py::register_exception_translator([](std::exception_ptr p) {
		try {
			if (p)
				std::rethrow_exception(p);
		} catch (const c10::OutOfMemoryError &e) {
			py::object oom =
			        py::module_::import("torch").attr("cuda").attr("OutOfMemoryError");
			PyErr_SetString(oom.ptr(), e.what_without_backtrace());
		} catch (const c10::IndexError &e) {
			PyErr_SetString(PyExc_IndexError, e.what_without_backtrace());
		} catch (const c10::Error &e) {
			PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
		}
	});

	m.def("_device_count", &deviceCount);
	m.def("_no_device_reason", &noDeviceReason);
	m.def("_set_device", [](int d) { setDevice(checkedDevice(d)); });
	m.def("_current_device", [] { return checkedDevice(-1); });
	m.def("_check_device", &checkedDevice);
	m.def("_synchronize", [](int d) {
		DeviceScope scope(checkedDevice(d));
		py::gil_scoped_release nogil;
		check(npurtDeviceSynchronize(), "npurtDeviceSynchronize");
	});
	m.def("_device_properties", &deviceProperties);
	m.def("_stream_priority_range", [] {
		int least = 0, greatest = 0;
		npurtDeviceGetStreamPriorityRange(&least, &greatest);
		return py::make_tuple(least, greatest);
	});

	m.def("_stream_pool",
	      [](int d, int prio) { return poolStream(checkedDevice(d), prio).id(); });
	m.def("_current_stream", [](int d) { return currentStream(checkedDevice(d)).id(); });
	m.def("_set_stream", [](int d, int64_t id) {
		c10::Stream s =
		        c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, checkedDevice(d)), id);
		nativeStream(s);  // checks the id
		exchangeStream(s);
	});
	m.def("_stream_query", [](int d, int64_t id) {
		c10::Stream s(c10::Stream::UNSAFE, c10::Device(kNpu, checkedDevice(d)), id);
		DeviceScope scope(d);
		npurtError_t err = npurtStreamQuery(nativeStream(s));
		if (err == npurtErrorNotReady)
			return false;
		check(err, "npurtStreamQuery");
		return true;
	});
	m.def("_stream_synchronize", [](int d, int64_t id) {
		c10::Stream s(c10::Stream::UNSAFE, c10::Device(kNpu, checkedDevice(d)), id);
		DeviceScope scope(d);
		npurtStream_t ns = nativeStream(s);
		py::gil_scoped_release nogil;
		check(npurtStreamSynchronize(ns), "npurtStreamSynchronize");
	});
	m.def("_stream_get_priority", [](int d, int64_t id) {
		return streamPriority(
		        c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, checkedDevice(d)), id));
	});

	py::class_<PyEvent>(m, "_Event")
	        .def(py::init<bool, bool>())
	        .def("record", &PyEvent::record)
	        .def("wait", &PyEvent::wait)
	        .def("query", &PyEvent::query)
	        .def("synchronize", &PyEvent::synchronize)
	        .def("elapsed_time", &PyEvent::elapsed)
	        .def_property_readonly("device", &PyEvent::device);

	m.def("_memory_stats", &memStats);
	m.def("_reset_peak_memory_stats", [](int d) {
		DeviceScope scope(checkedDevice(d));
		check(npurtMemResetPeakStats(), "npurtMemResetPeakStats");
	});
	m.def("_empty_cache", [](int d) {
		DeviceScope scope(checkedDevice(d));
		check(npurtMemEmptyCache(), "npurtMemEmptyCache");
	});
	m.def("_mem_get_info", [](int d) {
		DeviceScope scope(checkedDevice(d));
		size_t f = 0, t = 0;
		check(npurtMemGetInfo(&f, &t), "npurtMemGetInfo");
		return py::make_tuple(f, t);
	});
	m.def("_fallback_counts", &fallbackCounts);
}
