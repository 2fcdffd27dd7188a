#!/bin/sh
# Runs inside a VM booted on a debug kernel (scripts/torture.sh, scripts/test.sh): the fault
# sweeps (tests/vm/ksmfail.c), the race regressions (tests/vm/ksmrace.c) and the torture
# (tests/vm/torture.c) against the running KSM, with zram swap and a memory cgroup for the torture's reclaim, for each scanner-thread
# count. Output and exit status of each command land in build/test/$1/<suite>/<name>.{out,rc}
# (what tests/report.py reads). Always exits 0: a failing test is a result.
#
# Usage: [RACES=0] [MM=0] [FAULTS=1] [FAULTS_SWEEP=1|short] torture-guest.sh KERNEL SECONDS THREADS...
#   THREADS: one torture run per word, rksm only (C runs 1): a count (1, 2), or counts joined by
#   commas (1,2), between which the torture's controller switches scan_threads as it runs.
#   RACES=0 leaves the race regressions out (make test's C control runs the torture alone), MM=0
#   the mm selftests run with every process merged (make test runs them on the test kernels).
set -u
kernel=$1 secs=$2
shift 2
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/build/test/$kernel
exe=$top/build/tests
mkdir -p "$out"

run() { # suite name timeout command...
	suite=$1 name=$2 limit=$3
	shift 3
	mkdir -p "$out/$suite"
	printf '[%s] %-12s %-28s ' "$kernel" "$suite" "$name"
	start=$(date +%s)
	timeout "$limit" "$@" > "$out/$suite/$name.out" 2>&1
	rc=$?
	echo "$rc" > "$out/$suite/$name.rc"
	printf 'exit %d  %ds\n' "$rc" $(($(date +%s) - start))
}

# zram swap, and a memory cgroup whose limit makes the torture's processes reclaim.
if ! grep -q '^/dev/zram0' /proc/swaps; then
	echo 512M > /sys/block/zram0/disksize
	mkswap /dev/zram0 > /dev/null && swapon /dev/zram0
fi
cg=/sys/fs/cgroup
grep -q " $cg cgroup2 " /proc/mounts || mount -t cgroup2 none $cg
echo +memory > $cg/cgroup.subtree_control
mkdir -p $cg/torture
echo 64M > $cg/torture/memory.max

threads=/sys/kernel/mm/ksm/scan_threads
[ -e $threads ] || set -- 1
# The fault sweeps first (tests/vm/ksmfail.c): each KSM entry point with its 1st, 2nd, ...
# allocation failed, and the scanner threads' (with two of them too, on rksm). FAULTS_SWEEP=1
# (make torture) sweeps every N; FAULTS_SWEEP=short (make test) N = 1 to 16 and every 8th after.
case "${FAULTS_SWEEP:-0}" in
1)
	run faults sweep 3600 "$exe/ksmfail"
	if [ -e $threads ]; then
		echo 2 > $threads
		run faults sweep_2_threads 3600 "$exe/ksmfail"
		echo 1 > $threads
	fi
	;;
short)
	run faults sweep 1200 "$exe/ksmfail" -s 8
	if [ -e $threads ]; then
		echo 2 > $threads
		run faults sweep_2_threads 600 "$exe/ksmfail" -s 8 madvise unmerge prctl_off knobs ksmd
		echo 1 > $threads
	fi
	;;
esac
# make torture FAULTS=1: while each torture runs, the scanner threads' allocations fail at
# random (FAULT_PERCENT percent of them, default 1), through failslab and fail_page_alloc with
# their task filter: only threads marked make-it-fail fail, and the helpers that scan_threads
# starts meanwhile are marked as they appear.
dbg=/sys/kernel/debug
faults_on() {
	for f in failslab fail_page_alloc; do
		echo N > $dbg/$f/ignore-gfp-wait
		echo 0 > $dbg/$f/verbose
		echo Y > $dbg/$f/task-filter
		echo 1 > $dbg/$f/interval
		echo 1000000 > $dbg/$f/times
		echo "${FAULT_PERCENT:-1}" > $dbg/$f/probability
	done
	echo 0 > $dbg/fail_page_alloc/min-order
	(
		while :; do
			for c in /proc/[0-9]*/comm; do
				{ read -r name < "$c"; } 2> /dev/null || continue
				case $name in
				ksmd*) echo 1 > "${c%comm}make-it-fail" 2> /dev/null ;;
				esac
			done
			sleep 2
		done
	) &
	marker=$!
}
faults_off() { # the torture run's name
	kill "$marker" 2> /dev/null
	wait "$marker" 2> /dev/null
	n=0
	for f in failslab fail_page_alloc; do
		echo 0 > $dbg/$f/probability
		n=$((n + 1000000 - $(cat $dbg/$f/times)))
	done
	# The run counts only if allocations did fail in it.
	mkdir -p "$out/faults"
	if [ $n -gt 0 ]; then r=ok; else r="not ok"; fi
	printf '1..1\n%s 1 - %d allocations of the scanner threads failed during torture %s\n' \
		"$r" $n "$1" > "$out/faults/injected_$1.out"
	echo 0 > "$out/faults/injected_$1.rc"
	cat "$out/faults/injected_$1.out"
}
# The race regressions, 120 s each: the rounds they count failed within that on the code
# before their fixes, and C's bystander got no round in time with 45 s on the debug kernel.
# release (60 s) aims at a window that opened about once in 120 s (see the design page), and
# offline stops after four rounds.
race=120
if [ "${RACES:-1}" = 1 ]; then
	for s in register migrate release bystander zeroes offline; do
		b=$race
		[ "$s" = release ] && b=60
		run races "$s" $((b * 2 + 120)) "$exe/ksmrace" "$s" "$b"
	done
fi
for t in "$@"; do
	[ -e $threads ] && echo "${t%%,*}" > $threads
	# In the memory cgroup: the torture's reclaim (MADV_PAGEOUT and the limit) swaps merged
	# pages out to zram and faults them back.
	[ "${FAULTS:-0}" = 1 ] && faults_on
	run torture "threads_$t" $((secs + 600)) sh -c \
		"echo \$\$ > $cg/torture/cgroup.procs && exec $exe/torture -q -d $secs -t $t"
	[ "${FAULTS:-0}" = 1 ] && faults_off "threads_$t"
	cat "$out/torture/threads_$t.out" | sed -n '/^| /p'
done
[ -e $threads ] && echo 1 > $threads
# rksm's merge domains: the torture again, two threads, half as long, under merge_scope mm
# (every process a domain of its own: the KSM pages a fork shares are unmerged) and memcg (half
# of the workers in a second cgroup, -g: two domains, read from the cgroup at every visit). The
# torture checks that no KSM frame is ever mapped by workers of two domains. It ends with run=2,
# so no KSM page is left and the scope may change.
scope=/sys/kernel/mm/ksm/merge_scope
if [ -e $scope ]; then
	mkdir -p $cg/torture2
	echo 64M > $cg/torture2/memory.max
	# That check fails when it should: under global, workers share KSM frames, so checking them
	# as if every process were a domain of its own (-S mm) must fail (its test 10). A 20-second
	# run checks frames while its workers churn their areas, and once more after three full
	# scans of the still pages; up to three runs may try.
	echo 2 > /sys/kernel/mm/ksm/run
	run torture scope_check_fails 900 sh -c "echo \$\$ > $cg/torture/cgroup.procs; echo 1..1
		for try in 1 2 3; do
			echo 2 > /sys/kernel/mm/ksm/run
			$exe/torture -q -d 20 -t 1 -S mm > /tmp/scope_check.out 2>&1
			if grep -q '^not ok 10 - no KSM frame in two merge domains' /tmp/scope_check.out; then
				echo \"ok 1 - the frame check fails on frames shared across processes (-S mm, global; run \$try)\"
				exit 0
			fi
		done
		sed 's/^/# /' /tmp/scope_check.out
		echo 'not ok 1 - the frame check fails on frames shared across processes (-S mm, global)'"
	for s in mm memcg; do
		echo 2 > /sys/kernel/mm/ksm/run
		if ! echo $s > $scope; then
			run torture "scope_$s" 60 echo "not ok 1 - merge_scope refused $s"
			continue
		fi
		echo 2 > $threads
		run torture "scope_$s" $((secs / 2 + 600)) sh -c \
			"echo \$\$ > $cg/torture/cgroup.procs &&
			 exec $exe/torture -q -d $((secs / 2)) -t 2 -g $cg/torture2"
		cat "$out/torture/scope_$s.out" | sed -n '/^| /p'
		echo 1 > $threads
	done
	echo 2 > /sys/kernel/mm/ksm/run
	echo global > $scope
fi
# The kernel's mm selftests with every process merged (tests/vm/mm-merge-any.sh), judged against
# C KSM's on its debug kernel by tests/report.py. make test runs them on the test kernels instead.
if [ "${MM:-1}" = 1 ]; then
	st=$top/build/selftests
	. "$top/tests/vm/mm-merge-any.sh"
	mm_merge_any
fi
echo "[$kernel] torture done"
