// npu_python.cpp - the torch_npurt._C module: what torch_npurt.npu (Python)
// needs from the runtime. Streams cross the boundary as (device, id) pairs,
// the ids of npu_runtime.h; the Python classes wrap them.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/extension.h>
// After extension.h: Storage.h does not include what it uses.
#include <torch/csrc/Storage.h>

#include "npu_ops.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace torch_npurt {

namespace {

// checkSync for a pybind function, which has no torch warning handler to
// turn TORCH_WARN into a Python warning: warns through Python itself.
void warnOnSync(const char *what)
{
	if (syncDebugMode() != 1)
		return checkSync(what);
	if (PyErr_WarnEx(PyExc_UserWarning, syncMessage(what).c_str(), 1) < 0)
		throw py::error_already_set();
}

// An event of the Python API: its own flags (timing is opt-in in
// torch_npu's Event(enable_timing=...)), recorded on any stream of its
// device.
class PyEvent {
public:
	PyEvent(bool timing, bool blocking, bool interprocess)
	    : timing_(timing), blocking_(blocking), interprocess_(interprocess)
	{
		TORCH_CHECK(
		        !(timing && interprocess),
		        "an interprocess event cannot time: create it with enable_timing=False");
	}
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
		create(device);
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
		npurtStream_t ns = nativeStream(s);
		py::gil_scoped_release nogil;  // may wait for a record behind a host function
		check(npurtStreamWaitEvent(ns, ev_, 0), "npurtStreamWaitEvent");
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

	// The 64 bytes another process opens with from_ipc_handle (made on
	// the current NPU if the event was never recorded).
	py::bytes ipcHandle()
	{
		TORCH_CHECK(interprocess_, "the event was not created with interprocess=True");
		int dev = checkedDevice(-1);
		DeviceScope scope(device_ >= 0 ? device_ : dev);
		create(device_ >= 0 ? device_ : dev);
		npurtIpcEventHandle_t h{};
		check(npurtIpcGetEventHandle(&h, ev_), "npurtIpcGetEventHandle");
		return py::bytes(reinterpret_cast<const char *>(&h), sizeof(h));
	}

	static std::unique_ptr<PyEvent> fromIpcHandle(int device, const std::string &handle)
	{
		TORCH_CHECK(handle.size() == sizeof(npurtIpcEventHandle_t),
		            "an NPU event IPC handle has ", sizeof(npurtIpcEventHandle_t),
		            " bytes, not ", handle.size());
		device = checkedDevice(device);
		npurtIpcEventHandle_t h{};
		std::memcpy(&h, handle.data(), sizeof(h));
		auto ev = std::make_unique<PyEvent>(false, false, true);
		DeviceScope scope(device);
		check(npurtIpcOpenEventHandle(&ev->ev_, h), "npurtIpcOpenEventHandle");
		ev->device_ = device;
		return ev;
	}

private:
	void create(int device)
	{
		if (ev_)
			return;
		unsigned flags = (timing_ ? npurtEventTiming : npurtEventDisableTiming) |
		                 (blocking_ ? npurtEventBlockingSync : 0) |
		                 (interprocess_ ? npurtEventInterprocess : 0);
		check(npurtEventCreateWithFlags(&ev_, flags), "npurtEventCreateWithFlags");
		device_ = device;
	}

	npurtEvent_t ev_ = nullptr;
	bool timing_, blocking_, interprocess_;
	int device_ = -1;
};

// ----------------------------------------------------------- call sites

// Python files of torch and of this package: a call site names the first
// frame outside them (the user's line that called model(x), not
// torch/nn/modules/linear.py).
std::vector<std::string> gInternalPrefixes;

bool isInternal(const char *file)
{
	for (const std::string &p : gInternalPrefixes)
		if (std::strncmp(file, p.c_str(), p.size()) == 0)
			return true;
	return false;
}

// What the hook knows of a code object: referenced for good once seen,
// so that its address cannot name another one later. Guarded by the GIL.
struct CodeInfo {
	bool internal;
	std::string file;
};
constexpr size_t kMaxSites = 65536;  // libnpurt's limit too
std::unordered_map<PyCodeObject *, CodeInfo> gCodes;
struct SiteKeyHash {
	size_t operator()(const std::pair<PyCodeObject *, int> &k) const
	{
		return std::hash<const void *>()(k.first) ^ (static_cast<size_t>(k.second) << 20);
	}
};
std::unordered_map<std::pair<PyCodeObject *, int>, std::unique_ptr<PythonSite>, SiteKeyHash> gSites;

const CodeInfo *codeInfo(PyCodeObject *co)
{
	auto it = gCodes.find(co);
	if (it != gCodes.end())
		return &it->second;
	if (gCodes.size() >= kMaxSites)
		return nullptr;
	const char *name = PyUnicode_AsUTF8(co->co_filename);
	if (!name)
		return nullptr;  // not UTF-8: no site (the error is cleared below)
	Py_INCREF(co);
	return &gCodes.emplace(co, CodeInfo{isInternal(name), name}).first->second;
}

// The frame's place in its code: the instruction where the interpreter
// has it (constant time), the line on Pythons without PyFrame_GetLasti.
const PythonSite *siteOf(PyFrameObject *f, PyCodeObject *co, const CodeInfo &info)
{
#if PY_VERSION_HEX >= 0x030B0000
	const int at = PyFrame_GetLasti(f);
#else
	const int at = PyFrame_GetLineNumber(f);
#endif
	auto it = gSites.find({co, at});
	if (it != gSites.end())
		return it->second.get();
	if (gSites.size() >= kMaxSites)
		return nullptr;
	auto site = std::make_unique<PythonSite>(PythonSite{info.file, PyFrame_GetLineNumber(f)});
	return gSites.emplace(std::make_pair(co, at), std::move(site)).first->second.get();
}

void setInternalPrefixes(std::vector<std::string> prefixes)
{
	gInternalPrefixes = std::move(prefixes);
	for (auto &[co, info] : gCodes)
		info.internal = isInternal(info.file.c_str());
}

// The hook behind enqueueSite: runs on the enqueueing thread, which holds
// the GIL or released it in torch's binding (taken back briefly). Threads
// that never ran Python (autograd's device threads) have no site. A site
// seen before costs a walk of the frames and two lookups.
const PythonSite *pythonSite()
{
	if (!Py_IsInitialized() || !PyGILState_GetThisThreadState())
		return nullptr;
	PyGILState_STATE g = PyGILState_Ensure();
	PyObject *et, *ev, *tb;
	PyErr_Fetch(&et, &ev, &tb);  // an exception being handled stays as it is
	const PythonSite *site = nullptr, *inner = nullptr;
	PyFrameObject *f = PyEval_GetFrame();  // borrowed
	Py_XINCREF(f);
	while (f) {
		PyCodeObject *co = PyFrame_GetCode(f);
		const CodeInfo *info = codeInfo(co);
		if (info && !info->internal)
			site = siteOf(f, co, *info);
		else if (info && !inner)
			inner = siteOf(f, co, *info);  // if all is inside torch: the innermost
		Py_DECREF(co);
		PyFrameObject *back = site ? nullptr : PyFrame_GetBack(f);
		Py_DECREF(f);
		f = back;
	}
	if (PyErr_Occurred())
		PyErr_Clear();
	PyErr_Restore(et, ev, tb);
	PyGILState_Release(g);
	return site ? site : inner;
}

// Holds a stream: a host function on it waits until release() (or the
// gate is destroyed), so the work enqueued after it stays pending. For
// tests that must see asynchrony without timing anything.
class StreamGate {
public:
	StreamGate(int device, int64_t id, int timeoutS) : state_(std::make_shared<State>())
	{
		TORCH_CHECK(timeoutS > 0, "the gate's timeout must be positive");
		state_->timeoutS = timeoutS;
		c10::Stream s = streamFromIds(device, id);
		DeviceScope scope(device);
		// The host function owns a reference: it may run after the gate
		// is gone.
		auto *ref = new std::shared_ptr<State>(state_);
		npurtError_t err = npurtLaunchHostFunc(nativeStream(s), &StreamGate::wait, ref);
		if (err != npurtSuccess) {
			delete ref;
			check(err, "npurtLaunchHostFunc");
		}
	}
	~StreamGate() { release(); }
	StreamGate(const StreamGate &) = delete;
	StreamGate &operator=(const StreamGate &) = delete;

	void release()
	{
		std::lock_guard<std::mutex> g(state_->lock);
		state_->open = true;
		state_->cv.notify_all();
	}
	bool expired()
	{
		std::lock_guard<std::mutex> g(state_->lock);
		return state_->expired;
	}
	// Whether the stream has reached the gate (the work before it is done).
	bool reached()
	{
		std::lock_guard<std::mutex> g(state_->lock);
		return state_->reached;
	}

private:
	struct State {
		std::mutex lock;
		std::condition_variable cv;
		bool open = false, reached = false, expired = false;
		int timeoutS = 60;
	};
	static void wait(void *p)
	{
		std::unique_ptr<std::shared_ptr<State>> ref(
		        static_cast<std::shared_ptr<State> *>(p));
		State &st = **ref;
		std::unique_lock<std::mutex> g(st.lock);
		st.reached = true;
		// A test that waits for the gated work by mistake fails (expired)
		// instead of hanging: the gate opens by itself after its timeout.
		if (!st.cv.wait_for(g, std::chrono::seconds(st.timeoutS), [&] { return st.open; }))
			st.expired = true;
	}
	std::shared_ptr<State> state_;
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
	// Read by tools written for torch.cuda; approximations: active and
	// requested bytes are the allocated bytes (a block whose free waits
	// for queued work is not counted; sizes are rounded as blocks are).
	d["allocation.all.current"] = s.activeBlocks;
	d["allocation.all.peak"] = s.activeBlocksPeak;
	d["active_bytes.all.current"] = s.allocatedBytes;
	d["active_bytes.all.peak"] = s.allocatedBytesPeak;
	d["requested_bytes.all.current"] = s.allocatedBytes;
	d["requested_bytes.all.peak"] = s.allocatedBytesPeak;
	d["num_device_alloc"] = s.deviceAllocs;
	d["num_device_free"] = s.deviceFrees;
	return d;
}

py::dict memUsage(int device)
{
	npurtMemUsage u{};
	check(npurtDeviceGetMemUsage(checkedDevice(device), &u), "npurtDeviceGetMemUsage");
	py::dict d;
	d["free"] = u.freeBytes;
	d["total"] = u.totalBytes;
	d["process_reserved"] = u.processReservedBytes;
	d["process_allocated"] = u.processAllocatedBytes;
	d["process_device"] = u.processDeviceBytes;
	d["limit"] = u.limitBytes;
	d["contexts"] = u.contexts;
	return d;
}

// torch.cuda.utilization and memory_usage: the engines' busy share over
// the window since the previous reading of the device.
py::dict utilization(int device)
{
	npurtUtilization u{};
	check(npurtDeviceGetUtilization(checkedDevice(device), &u), "npurtDeviceGetUtilization");
	py::dict d;
	d["compute"] = u.compute;
	d["copy"] = u.copy;
	d["window_ns"] = u.windowNs;
	d["compute_busy_ns"] = u.computeBusyNs;
	d["copy_busy_ns"] = u.copyBusyNs;
	d["sample_ns"] = u.sampleNs;
	return d;
}

// torch.cuda.list_gpu_processes: the processes with the device open.
py::list processes(int device)
{
	const int dev = checkedDevice(device);
	std::vector<npurtProcessInfo> ps;
	for (;;) {
		unsigned n = 0;
		check(npurtDeviceGetProcesses(dev, nullptr, &n), "npurtDeviceGetProcesses");
		// Room for processes that open the device between the calls.
		ps.resize(n + 8);
		n = static_cast<unsigned>(ps.size());
		npurtError_t err = npurtDeviceGetProcesses(dev, ps.data(), &n);
		if (err == npurtErrorInvalidValue && n > ps.size()) {
			npurtGetLastError();
			continue;
		}
		check(err, "npurtDeviceGetProcesses");
		ps.resize(n);
		break;
	}
	py::list out;
	for (const auto &p : ps) {
		py::dict d;
		d["pid"] = p.pid;
		d["name"] = std::string(p.name);
		d["contexts"] = p.contexts;
		d["device_bytes"] = p.deviceBytes;
		d["host_bytes"] = p.hostBytes;
		d["queues"] = p.queues;
		d["compute_busy_ns"] = p.computeBusyNs;
		d["copy_busy_ns"] = p.copyBusyNs;
		out.append(d);
	}
	return out;
}

// torch.cuda.memory._set_allocator_settings: libnpurt's pool settings.
void setAllocatorSettings(const std::string &settings)
{
	check(npurtMemSetAllocatorConfig(settings.c_str()), "npurtMemSetAllocatorConfig");
}

std::string getAllocatorSettings()
{
	char buf[1024];
	check(npurtMemGetAllocatorConfig(buf, sizeof(buf)), "npurtMemGetAllocatorConfig");
	return buf;
}

// torch.cuda.memory_snapshot()'s shape: a list of segments, each with its
// blocks; a block's frames from the call site that allocated it.
py::list memSnapshot(int device)
{
	DeviceScope scope(checkedDevice(device));
	std::vector<npurtMemSegmentInfo> segs;
	std::vector<npurtMemBlockInfo> blocks;
	for (;;) {
		size_t ns = segs.size(), nb = blocks.size();
		npurtError_t err = npurtMemGetSnapshot(segs.data(), &ns, blocks.data(), &nb);
		if (err == npurtSuccess && ns <= segs.size() && nb <= blocks.size()) {
			segs.resize(ns);
			blocks.resize(nb);
			break;
		}
		if (err != npurtSuccess && err != npurtErrorInvalidValue)
			check(err, "npurtMemGetSnapshot");
		npurtGetLastError();
		// The pool grew between the calls: room for it, and a margin.
		segs.resize(ns + 8);
		blocks.resize(nb + 32);
	}
	py::list out;
	static const char *const states[] = {"inactive", "active_allocated", "active_pending_free"};
	for (const auto &sg : segs) {
		py::dict seg;
		seg["device"] = checkedDevice(device);
		seg["address"] = sg.address;
		seg["total_size"] = sg.size;
		seg["allocated_size"] = sg.allocatedBytes;
		seg["active_size"] = sg.allocatedBytes + sg.pendingFreeBytes;
		seg["segment_type"] = sg.small ? "small" : "large";
		seg["stream"] = 0;
		seg["is_expandable"] = sg.expandable != 0;
		// An expandable segment's range holds memory only where mapped.
		seg["mapped_size"] = sg.mappedBytes;
		uint64_t requested = 0;
		py::list bl;
		for (uint32_t i = sg.firstBlock; i < sg.firstBlock + sg.blocks; i++) {
			const npurtMemBlockInfo &b = blocks[i];
			py::dict bd;
			bd["address"] = b.address;
			bd["size"] = b.size;
			bd["requested_size"] = b.requestedSize;
			bd["state"] = states[b.state < 3 ? b.state : 0];
			bd["call_site"] = b.callSite ? py::object(py::str(b.callSite)) : py::none();
			requested += b.requestedSize;
			bl.append(bd);
		}
		seg["requested_size"] = requested;
		seg["blocks"] = bl;
		out.append(seg);
	}
	return out;
}

// The pool's history (npurtMemGetHistory) as torch's device_traces entries:
// action, addr, size, stream (the native handle, 0 the default stream),
// time_us and call_site (Python turns it into frames).
py::list memHistory(int device)
{
	DeviceScope scope(checkedDevice(device));
	std::vector<npurtMemTraceEntry> events;
	for (;;) {
		size_t n = events.size();
		npurtError_t err = npurtMemGetHistory(events.data(), &n);
		if (err == npurtSuccess && n <= events.size()) {
			events.resize(n);
			break;
		}
		if (err != npurtSuccess && err != npurtErrorInvalidValue)
			check(err, "npurtMemGetHistory");
		npurtGetLastError();
		events.resize(n + 64);  // it grew between the calls
	}
	static const char *const actions[] = {
	        "alloc",        "free_requested", "free_completed", "segment_alloc",
	        "segment_free", "segment_map",    "segment_unmap",  "oom"};
	py::list out;
	for (const auto &e : events) {
		py::dict d;
		d["action"] = e.action < 8 ? actions[e.action] : "unknown";
		d["addr"] = e.address;
		d["size"] = e.size;
		d["stream"] = reinterpret_cast<uintptr_t>(e.stream);
		d["time_us"] = e.timeNs / 1000;
		d["call_site"] = e.callSite ? py::object(py::str(e.callSite)) : py::none();
		if (e.action == npurtMemTraceOom)
			d["device_free"] = e.address;
		out.append(d);
	}
	return out;
}

// The Python OOM observer (torch's signature: device, bytes asked for, bytes
// allocated on the device, bytes free on it), kept for the process's life.
py::object *gOomObserver = nullptr;

void oomTrampoline(int device, size_t requested, const char *message, void *user)
{
	(void)message;
	(void)user;
	py::gil_scoped_acquire gil;
	if (!gOomObserver || gOomObserver->is_none())
		return;
	npurtMemUsage u{};
	if (npurtDeviceGetMemUsage(device, &u) != npurtSuccess)
		npurtGetLastError();
	try {
		(*gOomObserver)(device, requested, u.processAllocatedBytes, u.freeBytes);
	} catch (py::error_already_set &e) {
		e.discard_as_unraisable("torch_npurt's out-of-memory observer");
	}
}

void attachOomObserver(py::object fn)
{
	if (!fn.is_none() && !PyCallable_Check(fn.ptr()))
		throw py::type_error("the out-of-memory observer must be callable or None");
	if (!gOomObserver)
		gOomObserver = new py::object();  // never freed: outlives the interpreter's end
	*gOomObserver = std::move(fn);
	check(npurtMemSetOomObserver(gOomObserver->is_none() ? nullptr : &oomTrampoline, nullptr),
	      "npurtMemSetOomObserver");
}

py::dict deviceProperties(int device)
{
	npurtDeviceProp p{};
	check(npurtGetDeviceProperties(&p, checkedDevice(device)), "npurtGetDeviceProperties");
	py::dict d;
	d["name"] = std::string(p.name);
	d["device_path"] = std::string(p.devicePath);
	d["debugfs_path"] = std::string(p.debugfsPath);
	d["total_memory"] = p.totalGlobalMem;
	d["copy_engine_count"] = p.copyEngineCount;
	d["compute_engine_count"] = p.computeEngineCount;
	d["clock_rate_hz"] = p.clockRateHz;
	d["driver_api_version"] = p.driverApiVersion;
	d["emulated"] = p.emulated != 0;
	// torch.cuda's property names, for code written against them.
	d["major"] = p.major;
	d["minor"] = p.minor;
	d["multi_processor_count"] = p.multiProcessorCount;
	d["is_integrated"] = p.integrated;
	d["is_multi_gpu_board"] = p.isMultiGpuBoard;
	char bus[16] = {};
	check(npurtDeviceGetPCIBusId(bus, sizeof(bus), checkedDevice(device)),
	      "npurtDeviceGetPCIBusId");
	d["pci_bus_id"] = std::string(bus);
	return d;
}

}  // namespace

// npu_graph.cpp: NPUGraph and the capture queries.
void registerGraphs(py::module &m);
void registerIpc(py::module &m);

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

	registerGraphs(m);
	registerIpc(m);
	m.def("_device_count", &deviceCount);
	m.def("_runtime_started", &runtimeStarted);
	m.def("_no_device_reason", &noDeviceReason);
	m.def("_set_device", [](int d) { setDevice(checkedDevice(d)); });
	// c10's device type of NPU streams (torch.Stream.device_type).
	m.attr("_device_type") = static_cast<int>(kNpu);
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
		c10::Stream s = streamFromIds(d, id);
		nativeStream(s);  // checks the id
		exchangeStream(s);
	});
	m.def("_stream_query", [](int d, int64_t id) {
		c10::Stream s = streamFromIds(d, id);
		DeviceScope scope(d);
		npurtError_t err = npurtStreamQuery(nativeStream(s));
		if (err == npurtErrorNotReady)
			return false;
		check(err, "npurtStreamQuery");
		return true;
	});
	m.def("_stream_synchronize", [](int d, int64_t id) {
		c10::Stream s = streamFromIds(d, id);
		warnOnSync("torch.npu.Stream.synchronize");
		DeviceScope scope(d);
		npurtStream_t ns = nativeStream(s);
		py::gil_scoped_release nogil;
		check(npurtStreamSynchronize(ns), "npurtStreamSynchronize");
	});
	m.def("_stream_get_priority",
	      [](int d, int64_t id) { return streamPriority(streamFromIds(d, id)); });

	py::class_<PyEvent>(m, "_Event")
	        .def(py::init<bool, bool, bool>())
	        .def_static("from_ipc_handle", &PyEvent::fromIpcHandle)
	        .def("ipc_handle", &PyEvent::ipcHandle)
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
	m.def("_reset_accumulated_memory_stats", [](int d) {
		DeviceScope scope(checkedDevice(d));
		check(npurtMemResetAccumulatedStats(), "npurtMemResetAccumulatedStats");
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
	m.def("_autocast_registered", &autocastRegistered);
	m.def("_mem_usage", &memUsage);
	m.def("_utilization", &utilization);
	m.def("_external_stream", [](int d, uintptr_t handle) {
		return externalStream(checkedDevice(d), reinterpret_cast<npurtStream_t>(handle));
	});
	m.def("_stream_handle", &streamHandle);
	m.def("_can_access_peer", [](int d, int peer) {
		int can = 0;
		check(npurtDeviceCanAccessPeer(&can, checkedDevice(d), checkedDevice(peer)),
		      "npurtDeviceCanAccessPeer");
		return can != 0;
	});
	// torch.cuda.caching_allocator_alloc/delete: the tensors' allocator.
	m.def("_raw_alloc", [](size_t n, int d) {
		c10::DeviceGuard guard(
		        c10::Device(kNpu, static_cast<c10::DeviceIndex>(checkedDevice(d))));
		return reinterpret_cast<uintptr_t>(allocator()->raw_allocate(n));
	});
	m.def("_raw_delete", [](uintptr_t p) { rawDelete(reinterpret_cast<void *>(p)); });
	m.def("_processes", &processes);
	m.def("_memory_snapshot", &memSnapshot);
	m.def("_memory_history", &memHistory);
	m.def("_record_memory_history", [](size_t maxEntries) {
		check(npurtMemRecordHistory(maxEntries), "npurtMemRecordHistory");
	});
	m.def("_set_allocator_settings", &setAllocatorSettings);
	m.def("_get_allocator_settings", &getAllocatorSettings);
	m.def("_set_memory_limit", [](size_t bytes, int d) {
		check(npurtSetMemoryLimit(checkedDevice(d), bytes), "npurtSetMemoryLimit");
	});
	m.def("_set_memory_fraction", [](double f, int d) {
		check(npurtSetMemoryFraction(checkedDevice(d), f), "npurtSetMemoryFraction");
	});
	m.def("_get_memory_limit", [](int d) {
		size_t b = 0;
		check(npurtGetMemoryLimit(checkedDevice(d), &b), "npurtGetMemoryLimit");
		return b;
	});
	m.def("_attach_out_of_memory_observer", &attachOomObserver);

	setPythonSiteHook(&pythonSite);
	m.def("_set_internal_prefixes", &setInternalPrefixes);
	m.def("_set_sync_debug_mode", &setSyncDebugMode);
	m.def("_get_sync_debug_mode", &syncDebugMode);
	m.def("_set_call_sites", &setCallSitesEnabled);
	m.def("_call_sites", &callSitesEnabled);
	// Waits for an event recorded behind a host function block until the
	// record happened: let other Python threads run meanwhile.
	m.def("_backward_prologue", &syncStreamsBeforeBackward,
	      py::call_guard<py::gil_scoped_release>());
	m.def("_backward_epilogue", &syncStreamsAfterBackward,
	      py::call_guard<py::gil_scoped_release>());
	m.def("_stream_recover", [](int d, int64_t id) {
		c10::Stream s = streamFromIds(d, id);
		DeviceScope scope(d);
		check(npurtStreamRecover(nativeStream(s)), "npurtStreamRecover");
	});
	m.def("_host_memory_stats", [](int device) {
		npurtHostMemStats s = hostMemStats(device);
		py::dict d;
		d["allocated_bytes.current"] = s.allocatedBytes;
		d["allocated_bytes.peak"] = s.allocatedBytesPeak;
		d["reserved_bytes.current"] = s.reservedBytes;
		d["reserved_bytes.peak"] = s.reservedBytesPeak;
		d["parked_blocks"] = s.parkedBlocks;
		d["cached_blocks"] = s.cachedBlocks;
		d["num_host_alloc"] = s.hostAllocs;
		d["num_host_free"] = s.hostFrees;
		d["allocation.allocated"] = s.allocCalls;
		d["allocation.freed"] = s.freeCalls;
		d["cache_hits"] = s.cacheHits;
		return d;
	});
	// Tensor.set_(storage) for an NPU storage: torch 1.13's argument parser
	// rejects storages of PrivateUse1 ("Invalid device for storage").
	m.def("_set_storage", [](at::Tensor self, py::object storage, int64_t offset,
	                         std::vector<int64_t> size, std::vector<int64_t> stride) {
#if NPU_TORCH_AT_LEAST(2, 1)
		TORCH_CHECK(THPStorage_Check(storage.ptr()),
		            "_set_storage: expected an UntypedStorage");
		c10::Storage st = THPStorage_Unpack(reinterpret_cast<THPStorage *>(storage.ptr()));
#else
		TORCH_CHECK(PyObject_IsInstance(storage.ptr(), THPStorageClass) == 1,
		            "_set_storage: expected an UntypedStorage");
		c10::StorageImpl *impl = reinterpret_cast<THPStorage *>(storage.ptr())->cdata;
		c10::Storage st(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(impl));
#endif
		TORCH_CHECK(st.device() == self.device(), "_set_storage: a storage on ",
		            st.device(), " for a tensor on ", self.device());
		self.set_(st, offset, size, stride);
		return self;
	});
	m.def("_empty_pinned", [](std::vector<int64_t> sizes, py::object dtype, int d) {
		DeviceScope scope(checkedDevice(d));
		at::ScalarType st = torch::python::detail::py_object_to_dtype(dtype);
		return at::detail::empty_generic(sizes, pinnedAllocator(),
		                                 c10::DispatchKeySet(c10::DispatchKey::CPU), st,
		                                 c10::nullopt);
	});

	py::class_<StreamGate>(m, "_StreamGate")
	        .def(py::init<int, int64_t, int>())
	        .def("release", &StreamGate::release)
	        .def("expired", &StreamGate::expired)
	        .def("reached", &StreamGate::reached);

	m.def("_profiler_start", [] { check(npurtProfilerStart(), "npurtProfilerStart"); });
	m.def("_profiler_stop", [] { check(npurtProfilerStop(), "npurtProfilerStop"); });
	m.def("_profiler_export", [](const std::string &path) {
		py::gil_scoped_release nogil;
		check(npurtProfilerExportTrace(path.c_str()), "npurtProfilerExportTrace");
	});
	m.def("_profiler_summary", [] {
		size_t need = 0;
		check(npurtProfilerSummary(nullptr, 0, &need), "npurtProfilerSummary");
		std::string buf(need + 1, '\0');
		check(npurtProfilerSummary(&buf[0], buf.size(), &need), "npurtProfilerSummary");
		buf.resize(std::strlen(buf.c_str()));
		return buf;
	});
}
