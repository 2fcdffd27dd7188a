#!/bin/sh
# Runs inside the test VM (see scripts/test.sh): every guest-side suite against the running
# kernel. Each command's output and exit status land in build/test/$1/<suite>/<name>.{out,rc};
# tests/report.py turns them into the verdict. Always exits 0: a failing test is a result.
set -u
kernel=$1
# The KSM it runs: c or rust (an arm64 kernel's name says its page size too: rust-arm64-16k).
impl=${kernel%%-*}
# FAULT (second argument) injects a failure on purpose, to show that the harness catches it:
#   panic     the guest kernel crashes (sysrq c) before the suites run
#   warning   LKDTM provokes a kernel WARNING, then the suites run as usual
#   selftest  a merged workload runs beside ksm_tests -M, whose exact global counters then fail
fault=${2:-}
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/build/test/$kernel
st=$top/build/selftests
mkdir -p "$out"

n=0
run() { # suite name timeout command...
	suite=$1 name=$2 limit=$3
	shift 3
	n=$((n + 1))
	mkdir -p "$out/$suite"
	printf '[%s] %-12s %-28s ' "$kernel" "$suite" "$name"
	start=$(date +%s)
	timeout "$limit" "$@" > "$out/$suite/$name.out" 2>&1
	rc=$?
	echo "$rc" > "$out/$suite/$name.rc"
	printf 'exit %d  %ds\n' "$rc" $(($(date +%s) - start))
}

# Which KSM runs: on rksm, no C KSM scanner in /proc/kallsyms (tests/vm/which_ksm.sh).
run kernel ksm_implementation 60 sh "$top/tests/vm/which_ksm.sh" "$kernel"

# The sysfs ABI first, while every knob still has its boot value (tests/vm/sysfs_abi.py).
run sysfs abi 600 python3 "$top/tests/vm/sysfs_abi.py" "$out/sysfs/abi.record" "$top/build/tests/ksmpages"

# The kernel's own KSM selftests, unmodified, every mode. They run from their own directory:
# ksm_functional_tests re-executes itself as ./ksm_functional_tests.
cd "$st" || exit 1
case $fault in
panic)
	echo "[$kernel] FAULT=panic: crashing the guest kernel on purpose"
	echo c > /proc/sysrq-trigger ;;
warning)
	echo "[$kernel] FAULT=warning: provoking a kernel WARNING on purpose"
	echo WARNING > /sys/kernel/debug/provoke-crash/DIRECT ;;
selftest)
	echo "[$kernel] FAULT=selftest: 8 MiB of equal pages merge beside ksm_tests -M"
	sleep 600 | "$top/build/tests/ksmpages" -m best -s 8 > /dev/null &
	sleep 1 ;;
esac
run ksm_tests M          300 "$st/ksm_tests" -M
[ "$fault" = selftest ] && pkill -f 'build/tests/ksmpages' && pkill -x sleep
selftests() { # suite-name suffix
	sfx=$1
	# -M alone runs first, above, with the FAULT hook; later rounds run it here.
	[ -n "$sfx" ] && run "ksm_tests$sfx" M 300 "$st/ksm_tests" -M
	run "ksm_tests$sfx" M_t1       300 "$st/ksm_tests" -M -t 1
	run "ksm_tests$sfx" U          300 "$st/ksm_tests" -U
	run "ksm_tests$sfx" Z_z0       300 "$st/ksm_tests" -Z -z 0
	run "ksm_tests$sfx" Z_z1       300 "$st/ksm_tests" -Z -z 1
	# -N -m 1 assumes ksmd visits every page on every pass, which smart_scan (on by default since
	# 6.7) does not promise: it runs with smart_scan=0 (Documentation/mm/rksm.rst, "Upstream tests
	# and their settings").
	smart=$(cat /sys/kernel/mm/ksm/smart_scan)
	echo 0 > /sys/kernel/mm/ksm/smart_scan
	run "ksm_tests$sfx" N_m1       300 "$st/ksm_tests" -N -m 1
	echo "$smart" > /sys/kernel/mm/ksm/smart_scan
	run "ksm_tests$sfx" N_m0       300 "$st/ksm_tests" -N -m 0
	run "ksm_tests$sfx" P          600 "$st/ksm_tests" -P -s 64
	run "ksm_tests$sfx" H          600 "$st/ksm_tests" -H -s 64
	run "ksm_tests$sfx" C          300 "$st/ksm_tests" -C
	# test_prctl_fork's child counts its parent's merged pages (Documentation/mm/rksm.rst,
	# "Upstream tests and their settings"): five pages of one letter in the environment give the
	# parent four equal stack pages that never change, so that ksmd merges some of the parent's
	# pages within the two passes the child waits for, whatever its other pages do.
	run "ksm_functional_tests$sfx" all 600 env KSM_SELFTEST_PAD="$pad" ./ksm_functional_tests
	# ksm_functional_tests leaves use_zero_pages set (test_unmerge_zero_pages sets it): the
	# suites after it run with the boot value, as the ones before it did.
	echo "$zero_pages" > /sys/kernel/mm/ksm/use_zero_pages
}
pad=$(python3 -c 'import os; print("K" * 5 * os.sysconf("SC_PAGE_SIZE"))')
zero_pages=$(cat /sys/kernel/mm/ksm/use_zero_pages)

# rksm's own workloads: full merge, every byte back, COW privacy, unmerge.
workloads() { # suite-name suffix
	sfx=$1
	for mode in best worst prefix; do
		for procs in 2 3; do
			run "workloads$sfx" "${mode}_x$procs" 900 python3 "$top/tests/vm/ksmrun.py" --tap \
				--quiet --mode $mode --procs $procs --mib 16 --cow --unmerge
		done
	done
	run "workloads$sfx" random_x2 900 python3 "$top/tests/vm/ksmrun.py" --tap --quiet \
		--mode random --procs 2 --mib 16
}

selftests ""
cd "$top" || exit 1

# What 6.12's test_prctl_fork_exec means to check, done right (see tests/vm/prctl_fork_exec.c).
run prctl prctl_fork_exec 300 "$top/build/tests/prctl_fork_exec"

# A merge keeps the soft-dirty and uffd-wp bits of the entries it replaces (tests/vm/ptebits.c;
# C KSM drops them: tests/report.py's C_DEFECTS).
run ptebits ptebits 300 "$top/build/tests/ptebits"
# The same with use_zero_pages (each page mapped to the zero page), and through an unmerge.
run ptebits zero_page 300 "$top/build/tests/ptebits" zero
run ptebits unmerge 300 "$top/build/tests/ptebits" unmerge

# A page shared since a fork, merged by the child, mapped by a parent that is not scanned: it
# must stay migratable (tests/vm/forkmerge.c; C KSM's defect: tests/report.py's C_DEFECTS).
run rmap forkmerge 600 "$top/build/tests/forkmerge"

# Smart scan must not keep a pair of equal pages apart for good: pages whose skipping schedules
# are out of phase (tests/vm/skipphase.c; C KSM's defect: tests/report.py's C_DEFECTS).
run smartscan skipphase 600 "$top/build/tests/skipphase"

# KSM pages spread over a sparse area, unmerged by madvise, prctl, run=2 and exit
# (tests/vm/sparse.c): 1 TiB on rksm, whose unmerge looks only at the page tables that are
# mapped; 16 GiB on C, whose unmerge in 6.12 visits every address (minutes a terabyte under TCG).
if [ "$impl" = c ]; then sparse_gib=16; else sparse_gib=1024; fi
run sparse unmerge 300 "$top/build/tests/sparse" $sparse_gib

# The scan-time advisor counts the CPU time of every scanner thread (tests/vm/ksmrace.c).
run races advisor 300 "$top/build/tests/ksmrace" advisor 150

workloads ""

# Operators' tools. Debian's ksmtuned, unmodified, makes the same run and pages_to_scan
# decisions from the same memory pressure (tests/vm/ksmtuned.py; tests/report.py compares the
# record with C's of the same run). QEMU guests with mem-merge=on merge, one with mem-merge=off
# beside them does not (tests/vm/mem_merge.py; bare-metal guests of the VM's architecture).
run ksmtuned decisions 600 python3 "$top/tests/vm/ksmtuned.py" "$out/ksmtuned/decisions.record"
run qemu mem_merge 1500 python3 "$top/tests/vm/mem_merge.py"

# rksm's merge domains: no frame shared across cgroups or processes when asked, a process that
# moves follows its new cgroup (tests/vm/merge_scope.py).
if [ -e /sys/kernel/mm/ksm/merge_scope ]; then
	run domains merge_scope 900 python3 "$top/tests/vm/merge_scope.py"
	# The write-timing side channel, open under global, shut under memcg and mm.
	run domains sidechannel 600 python3 "$top/tests/vm/sidechannel.py" --tap --times "$out/domains/sidechannel.times"
fi

# rksm with two scanner threads (its scan_threads knob): the selftests and workloads again.
threads=/sys/kernel/mm/ksm/scan_threads
if [ -e $threads ]; then
	if echo 2 > $threads; then
		cd "$st" || exit 1
		selftests _2threads
		cd "$top" || exit 1
		workloads _2threads
		# Large folios split by the helpers' merges as well as by ksmd's.
		run lifecycle_2threads thp 300 python3 "$top/tests/vm/ksmlife.py" thp
		run threads back_to_1 60 sh -c "echo 1 > $threads && test \"\$(cat $threads)\" = 1 &&
			echo 'ok 1 - scan_threads back to 1'"
	else
		run threads set_2 60 echo "not ok 1 - scan_threads refused 2"
	fi
fi

# The kernel's mm selftests with every process merged (tests/vm/mm-merge-any.sh).
. "$top/tests/vm/mm-merge-any.sh"
mm_merge_any

# Memory hot-remove where the guest has memory that can go offline outside the debug boots:
# arm64's virtio-mem blocks on node 1 (scripts/vm.sh; x86 offlines ZONE_MOVABLE boot memory in
# make test's debug boots, tests/vm/torture-guest.sh). The blocks holding merged pages are
# offlined and onlined again in rounds (tests/vm/ksmrace.c, offline).
if ls /sys/bus/virtio/drivers/virtio_mem/virtio* > /dev/null 2>&1; then
	run hotremove offline 900 "$top/build/tests/ksmrace" offline 120
fi

# Merged pages through swap, migration, per-node trees, memory failure and soft offline, and the
# trace events (tests/vm/ksmlife.py). Last: it poisons pages for good and leaves zram swap on.
run lifecycle all 900 python3 "$top/tests/vm/ksmlife.py"

echo "[$kernel] $n commands done"
