# Top-level build of the NPU stack. `make help` lists the targets.
#
# Every target depends on `deps`, so each works as the first command on a
# fresh machine; `make deb` on what building the packages needs alone
# (`deps.sh --deb`), so that it works on any Debian release.

TOP := $(CURDIR)
BUILD := $(TOP)/build
KVER = $(shell $(TOP)/tools/kver)
KDIR = /lib/modules/$(KVER)/build
JOBS ?= 2
CMAKE_BUILD := $(BUILD)/cmake
VMRUN := $(TOP)/tools/vmrun
PARAMS ?=
# Caches outside the clone, shared by fresh clones (CI builds one each run):
# the debug kernel, ccache's objects, clang-tidy's verdicts.
NPU_CACHE ?= /var/cache/npu-stack
export NPU_CACHE
# ccache keys on paths relative to the tree, so another clone hits too.
export CCACHE_DIR ?= $(NPU_CACHE)/ccache
export CCACHE_BASEDIR := $(TOP)
export CCACHE_NOHASHDIR := true
# Host-side checkpatch, from the extracted kernel source.
CHECKPATCH := $(BUILD)/linux-src/scripts/checkpatch.pl
# Kernel sources we write (not the generated npu.mod.c and npu_config.h).
KERNEL_SOURCES = $(filter-out %.mod.c %/npu_config.h,$(wildcard $(TOP)/kernel/*.c \
	$(TOP)/kernel/*.h $(TOP)/kernel/probes/*.c))

.PHONY: all deps kernel userspace kselftests fuzz test test-debug deb test-packages debug-kernel demo bench soak check check-kernel perf-probes \
	check-cxx load unload install clean help

all: kernel userspace kselftests

help:
	@echo "make deps        install the Debian packages the build and tests need, and make"
	@echo "                 (once, cached) the Debian 13 root of the debian13 lane"
	@echo "make             build npu.ko, libnpurt, tools, examples and tests"
	@echo "make fuzz        build only the uAPI fuzzer, build/cmake/bin/npu-fuzz (make builds it too)"
	@echo "make demo        boot the VM with the module and run the demo"
	@echo "make test        host unit tests, then all VM suites on each lane (stock 6.1, Debian 13"
	@echo "                 with 6.12, the debug kernels of 6.1 and 6.12, the packages); prints"
	@echo "                 'N passed, N failed'. NPU_LANES=stock: one lane"
	@echo "make test-debug  only the debug-kernel lanes (lockdep, KASAN, kmemleak, ... on 6.1 and 6.12), every suite"
	@echo "make deb         build the Debian packages into build/deb (lintian-checked)"
	@echo "make test-packages  install them in fresh Debian 12 and 13 roots, boot them, use them, purge them"
	@echo "make debug-kernel  build (once, cached in /var/cache/npu-stack) the debug kernel"
	@echo "make bench       boot the VM and run npurt-bench (ratios against limits measured in the same run)"
	@echo "make soak        boot the VM and soak runtime and driver with faults, hangs and kills injected"
	@echo "                 (SOAK_SECONDS=600; figures in build/soak/soak.json)"
	@echo "make check       checkpatch and sparse on the kernel, clang-format/clang-tidy on C++"
	@echo "make load        load npu.ko on this host (kernel must match; PARAMS='num_devices=4')"
	@echo "make unload      unload it"
	@echo "make install     install libnpurt, headers, pkg-config and CMake files (PREFIX=/usr/local)"

deps:
	@sh $(TOP)/tools/deps.sh

kernel: deps
	@$(TOP)/kernel/configure.sh $(KDIR) $(TOP)/kernel/npu_config.h
	$(MAKE) -C $(KDIR) M=$(TOP)/kernel -j$(JOBS) modules
	@# Kbuild's generated module info source is compiled by now and made
	@# again when needed; removed so kernel/*.c holds only our sources.
	@rm -f $(TOP)/kernel/npu.mod.c

$(CMAKE_BUILD)/Makefile: CMakeLists.txt | deps
	cmake -S $(TOP) -B $(CMAKE_BUILD) -DCMAKE_INSTALL_PREFIX=$(or $(PREFIX),/usr/local) \
		$$(command -v ccache >/dev/null && echo -DCMAKE_C_COMPILER_LAUNCHER=ccache \
			-DCMAKE_CXX_COMPILER_LAUNCHER=ccache) >/dev/null

userspace: deps $(CMAKE_BUILD)/Makefile
	cmake --build $(CMAKE_BUILD) -j$(JOBS)

kselftests: deps
	$(MAKE) -C $(TOP)/tests/kselftest O=$(BUILD)/kselftest

# The uAPI fuzzer (tools/fuzz) alone; `make` builds it with the CMake tree,
# as tools/sysroot/build-lane does for the Debian 13 lane.
fuzz: deps $(CMAKE_BUILD)/Makefile
	@# A tree configured before the fuzzer existed does not know its target.
	@cmake --build $(CMAKE_BUILD) --target help | grep npu-fuzz >/dev/null || cmake $(CMAKE_BUILD) >/dev/null
	cmake --build $(CMAKE_BUILD) --target npu-fuzz -j$(JOBS)

test: all
	@$(TOP)/tests/run-tests.sh

test-debug: all
	@NPU_LANES="$(or $(LANES),debug debug13)" NPU_DEBUG_SUITES=all NPU_DEBUG13_SUITES=all \
		$(TOP)/tests/run-tests.sh

# Debian packages (packaging/debian) into build/deb, lintian-checked.
deb:
	@sh $(TOP)/tools/deps.sh --deb
	@$(TOP)/tools/packages/build-debs $(BUILD)/deb

# The packages installed in a fresh Debian 12 root, and built and installed
# in a fresh Debian 13 one, DKMS building the module there, booted and used
# as a user of the render group, then purged.
test-packages: all
	@NPU_LANES="packages packages13" $(TOP)/tests/run-tests.sh

debug-kernel: deps
	@$(TOP)/tools/debug-kernel/build
	@$(TOP)/tools/debug-kernel/build $$(ls $(BUILD)/debian13/usr/src/linux-source-*.tar.xz | sort -V | tail -n 1) \
		$(TOP)/tools/debug-kernel/config.accel

# 4 GiB for the guest: the copy section holds 4 buffers of the largest size
# (256 MiB). A long job timeout, so that a busy host does not fail a long
# copy or GEMM (it changes no measured figure). BENCH_ARGS=--quick for a
# smoke test.
bench: all
	@$(VMRUN) --out $(BUILD)/bench --mem 4096 -p job_timeout_ms=20000 \
		$(addprefix -p ,$(PARAMS)) -- \
		$(TOP)/tools/bench/run-in-vm.sh $(BUILD) $(BUILD)/bench $(BENCH_ARGS)
	@echo "Results: $(BUILD)/bench/bench.json, bench.csv, bandwidth.png and bench-torch.json"

demo: all
	@$(VMRUN) --out $(BUILD)/vm-demo $(addprefix -p ,$(PARAMS)) -- $(CMAKE_BUILD)/bin/npurt-demo

# The soak (tools/soak; npu-soak --help): SOAK_SECONDS of workload (default
# 600; minutes to hours) in one VM boot, faults, hangs, latency and kills
# injected, then the module's unload checked; figures in build/soak/soak.json.
# SOAK_ARGS passes more options (--procs 6 --threads 4 ...), PARAMS module
# parameters (mem_size_mb=128 for a small device).
SOAK_SECONDS ?= 600
soak: all
	@$(VMRUN) --out $(BUILD)/soak --mem 3072 -t $$(( $(SOAK_SECONDS) + 900 )) \
		$(addprefix -p ,$(PARAMS)) -- env SOAK_SECONDS=$(SOAK_SECONDS) \
		$(TOP)/tools/soak/run-bounded.sh $(BUILD)/soak $(CMAKE_BUILD)/bin/npu-soak $(SOAK_ARGS)
	@echo "Figures: $(BUILD)/soak/soak.json"

# Measurements behind issue #6's notes that npurt-bench does not make
# (enqueue cost with the device busy, copy speed per buffer pair, the
# emulator's TLB collisions), in one VM boot.
perf-probes: all
	@$(TOP)/tools/perf/run.sh

check: check-kernel check-cxx

check-kernel: kernel
	perl $(CHECKPATCH) --no-tree --strict --terse --show-types -f $(KERNEL_SOURCES)
	@# uapi headers cannot use the kernel's BIT() macros.
	perl $(CHECKPATCH) --no-tree --strict --terse --show-types --ignore BIT_MACRO \
		-f $(TOP)/uapi/drm/npu_drm.h
	$(MAKE) -C $(KDIR) M=$(TOP)/kernel C=2 CF="-D__CHECK_ENDIAN__" modules 2>&1 | \
		tee $(BUILD)/sparse.log | grep -E 'warning|error' && exit 1 || true

check-cxx: userspace
	clang-format --dry-run -Werror $$(git ls-files '*.cpp' '*.hpp' '*.h' '*.c' | \
		grep -v -E '^(kernel|uapi|tests/kselftest|tests/host)/')
	$(TOP)/tools/clang-tidy-cached $(CMAKE_BUILD) $$(git ls-files 'libnpurt/*.cpp' 'tools/*.cpp')

load: kernel
	@[ "$$(uname -r)" = "$(KVER)" ] || { echo "make load: running kernel $$(uname -r) is not $(KVER), the one npu.ko is built for; use tools/vmrun" >&2; exit 1; }
	modprobe -a drm drm_shmem_helper gpu-sched
	insmod $(TOP)/kernel/npu.ko $(PARAMS)

unload:
	rmmod npu

# ldconfig: the tools find libnpurt.so.0 in PREFIX/lib through ld.so's
# cache (/usr/local/lib is searched, but only once the cache knows it).
install: userspace
	cmake --install $(CMAKE_BUILD)
	@if [ "$$(id -u)" = 0 ]; then ldconfig; else echo "make install: run 'sudo ldconfig' if the prefix is a system one"; fi

clean:
	-$(MAKE) -C $(KDIR) M=$(TOP)/kernel clean
	rm -rf $(BUILD)/cmake $(BUILD)/kselftest $(BUILD)/vm $(BUILD)/vm-demo $(BUILD)/torch-ext \
		$(BUILD)/test-results $(TOP)/kernel/npu_config.h
