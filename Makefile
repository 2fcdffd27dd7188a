# rksm: Kernel Samepage Merging in Rust. `make run` shows it merging; `make test` is CI's verdict.
#
#   make setup                 host packages and bindgen (every target below runs it first)
#   make kernel KSM=rust|c     build/bzImage-$(KSM) from the one tree in build/ (ARCH=arm64
#                              PAGE=4K|16K|64K: build/Image-$(KSM)-arm64-16k, ...)
#   make vm KSM=.. CMD='..'    boot that kernel, run CMD in the guest, exit with its status
#   make kunit                 the KUnit suites of the rksm kernel, KTAP and a table
#   make test                  everything, ends with `N passed, N failed`
#   make test-arm64            make test's suites on arm64, at each page size of PAGES
#   make series                rksm as a git am-able patch series on 6.12.117, in build/series/
#   make run                   ksmpages best and worst on the rksm kernel, with a table
#   make bench                 C KSM and rksm side by side
#   make torture               the torture on the debug kernels (DURATION, default 30 min;
#                              FAULTS=1: the scanner threads' allocations fail at random;
#                              FAULTS_SWEEP=1: the fault sweeps first, every N)
#   make clippy                the Rust code through clippy (CLIPPY=1), warnings are errors
#   make check                 rustfmt --check and checkpatch on the project's own files
#   make fmt                   rustfmt the project's Rust in place

KSM ?= rust
CMD ?= true
export KSM CMD

S := scripts

.PHONY: all setup kernel kernels vm kunit test test-arm64 series run bench torture clippy check fmt \
	clean distclean

all: test

# ARCH=arm64 needs the cross tools and QEMU's arm64 emulator too: setup.sh adds them.
setup:
	@$(S)/setup.sh

kernel: setup
	@$(S)/kernel.sh

kernels: setup
	@KSM=c $(S)/kernel.sh
	@KSM=rust $(S)/kernel.sh

vm: kernel
	@$(S)/vm.sh

# kunit.py builds its own kernel (build/obj-kunit*): kunit.sh only prepares the source tree.
kunit: setup
	@$(S)/kunit.sh

test: setup
	@$(S)/test.sh

test-arm64:
	@$(S)/test-arm64.sh

series: setup
	@$(S)/series.sh

run: setup
	@$(S)/run.sh

bench: setup
	@$(S)/bench.sh

torture: setup
	@$(S)/torture.sh

clippy: setup
	@KSM=rust CLIPPY=1 FORCE=1 $(S)/kernel.sh

check:
	@$(S)/check.sh

fmt:
	@FIX=1 $(S)/check.sh

clean:
	rm -rf build/vm build/test build/tests build/selftests build/bench build/bzImage-*

distclean:
	rm -rf build
