#!/bin/sh
# Sourced by tests/vm/guest-tests.sh (make test) and tests/vm/torture-guest.sh (make torture),
# whose run(), $out, $st and $top it uses.
#
# The kernel's mm selftests with every process merged: run under PR_SET_MEMORY_MERGE
# (tests/vm/mergeany.c, inherited by their children), ksmd at full speed, zram swap on (cow swaps
# merged pages out). This guest fails some of their cases whatever KSM does (no hugetlb pages,
# no gup_test, no liburing), so their verdicts are not judged here: tests/report.py requires
# rksm's to equal C KSM's, case by case. mm_merged checks that KSM did merge pages meanwhile.
# Left out: pagemap_ioctl and uffd-unit-tests, whose verdicts depend on when ksmd write-protects
# a page (they differ from run to run on C KSM too), soft-dirty (each of its verdicts depends on
# whether ksmd merged a page between a write and the check), mremap_test (it maps at fixed
# addresses that may be taken).

# The selftests, in the order they run (scripts/selftests.sh builds these).
MM_TESTS="mkdirty madv_populate mremap_dontunmap mlock2-tests gup_longterm map_populate droppable
mseal_test cow"

# Prints the THP settings, one "file value" per line.
thp_settings() {
	for f in /sys/kernel/mm/transparent_hugepage/enabled \
		/sys/kernel/mm/transparent_hugepage/defrag \
		/sys/kernel/mm/transparent_hugepage/hugepages-*/enabled; do
		[ -e "$f" ] && echo "$f $(sed 's/.*\[\(.*\)\].*/\1/' "$f")"
	done
}

mm_merge_any() {
	ksm=/sys/kernel/mm/ksm
	saved="$(cat $ksm/run) $(cat $ksm/sleep_millisecs) $(cat $ksm/pages_to_scan)"
	saved="$saved $(cat $ksm/use_zero_pages)"
	if [ -e /sys/block/zram0 ] && ! grep -q '^/dev/zram0' /proc/swaps; then
		echo 256M > /sys/block/zram0/disksize && mkswap /dev/zram0 > /dev/null &&
			swapon /dev/zram0
	fi
	# Nothing merged before counts: mm_merged must see these selftests' pages shared.
	echo 2 > $ksm/run
	echo 1000 > $ksm/pages_to_scan
	echo 0 > $ksm/sleep_millisecs
	# C KSM's default. An earlier suite may have left it set (ksm_functional_tests sets it and
	# does not put it back); with it, ksmd maps mlock2-tests' locked zero-filled pages to the
	# zero page, which smaps does not count in Rss, and its "Locked" cases fail when ksmd gets
	# there first: on C KSM as on rksm.
	echo 0 > $ksm/use_zero_pages
	echo 1 > $ksm/run
	# The knobs in force, for the record.
	grep -H . $ksm/* > "$out/mm_merge_any.knobs" 2> /dev/null
	# cow changes the THP settings and puts them back only if it ends normally.
	thp=$(thp_settings)
	# pages_sharing, sampled while the selftests run.
	max=$out/mm_merge_any.sharing
	: > "$max"
	(while :; do
		cat $ksm/pages_sharing >> "$max"
		sleep 0.2
	done) &
	sampler=$!
	for t in $MM_TESTS; do
		# A bail-out of the pagemap race (see tests/report.py, MM_RACE) is run again, twice at
		# most, so that the comparison most often sees a whole run.
		for _ in 1 2 3; do
			run mm_merge_any "$t" 900 "$top/build/tests/mergeany" "$st/$t"
			echo "$thp" | while read -r f v; do echo "$v" > "$f"; done
			grep -q 'read and ioctl return unmatched results' "$out/mm_merge_any/$t.out" ||
				break
		done
		# Still bailed out: the selftest once more without merging, whose verdicts judge the
		# other kernel's cases beyond the bail-out. With 16 KiB pages on arm64, C KSM's cow bailed
		# out in 6 of 6 runs with ksmd merging, in none of 6 with ksmd stopped or without merging
		# (likely cause: ksmd splits a large folio before it merges a page of it, and the split
		# maps the folio by migration entries for a moment, which pagemap reports as swapped).
		if grep -q 'read and ioctl return unmatched results' "$out/mm_merge_any/$t.out"; then
			run mm_merge_any_unmerged "$t" 900 "$st/$t"
			echo "$thp" | while read -r f v; do echo "$v" > "$f"; done
		fi
	done
	kill $sampler
	wait $sampler 2> /dev/null
	run mm_merged pages_sharing 10 sh -c "m=\$(sort -n $max | tail -1); if [ \${m:-0} -gt 0 ]; then
		echo \"ok 1 - KSM shared pages while the mm selftests ran (at most \$m)\"; else
		echo 'not ok 1 - KSM shared no page while the mm selftests ran'; fi"
	set -- $saved
	echo "$2" > $ksm/sleep_millisecs
	echo "$3" > $ksm/pages_to_scan
	echo "$4" > $ksm/use_zero_pages
	echo "$1" > $ksm/run
}
