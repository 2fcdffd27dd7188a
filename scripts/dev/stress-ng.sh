#!/usr/bin/env bash
# Development tool: an external stress, not rksm's own. Debian's stress-ng (installed if missing)
# runs its memory stressors in the guest while KSM merges their pages at full speed (two scanner
# threads where the kernel has them): the vm stressor's every method on MADV_MERGEABLE pages,
# checking its own patterns (--verify), forks that make their pages mergeable, mmap and mmapfork;
# then the zero-one method with use_zero_pages; then run=2. Fails if a stressor failed, if any KSM
# page or node is left after run=2, or (scripts/vm.sh) if the kernel log has a KASAN, lockdep,
# UBSAN or kmemleak report. stress-ng's madvise stressor is left out: it poisons a page of its own
# (MADV_HWPOISON) and dies of the SIGBUS, on either kernel.
#   KSM=rust FLAVOR=debug DURATION=240 scripts/dev/stress-ng.sh     (FLAVOR=test: the test kernel)
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
KSM=${KSM:-rust}
FLAVOR=${FLAVOR:-debug}
DURATION=${DURATION:-240}
command -v stress-ng > /dev/null || apt-get install -y stress-ng > /dev/null
image=$B/bzImage-$KSM
[ "$FLAVOR" = test ] || image=$B/bzImage-$FLAVOR-$KSM
FLAVOR=$FLAVOR KSM=$KSM "$PROJECT/scripts/kernel.sh"
out=$B/stress-ng/$KSM-$FLAVOR
rm -rf "$out"
mkdir -p "$out"
cat > "$out/guest.sh" << 'EOF'
K=/sys/kernel/mm/ksm
out=$1
echo 0 > $K/sleep_millisecs
echo 2000 > $K/pages_to_scan
[ -e $K/scan_threads ] && echo 2 > $K/scan_threads
echo 1 > $K/run
(while :; do echo $(cat $K/pages_sharing $K/pages_shared $K/pages_unshared $K/full_scans); sleep 5; done) \
	> $out/ksm.log &
watch=$!
stress-ng --temp-path /tmp --vm 2 --vm-bytes 48M --vm-madvise mergeable --vm-method all \
	--fork 1 --fork-vm --mmap 1 --mmap-bytes 32M --mmapfork 1 --verify --timeout "$2"s \
	--metrics-brief > $out/stressors.log 2>&1
echo "stressors $?" > $out/rc
echo 1 > $K/use_zero_pages
stress-ng --temp-path /tmp --vm 2 --vm-bytes 48M --vm-madvise mergeable --vm-method zero-one \
	--fork 1 --fork-vm --verify --timeout 60s --metrics-brief > $out/zero.log 2>&1
echo "zero-one $?" >> $out/rc
kill $watch
echo 0 > $K/use_zero_pages
echo 2 > $K/run
for f in pages_shared pages_sharing pages_unshared ksm_zero_pages stable_node_chains \
	stable_node_dups; do
	echo "$f $(cat $K/$f)"
done > $out/left
EOF
say "stress-ng on $(basename "$image"): ${DURATION} s of stressors, 60 s of zero-one"
KSM=$KSM KERNEL=$image VM_RUN=$B/vm/stress-ng-$KSM TIMEOUT=$((DURATION * 4 + 900)) \
	CMD="sh $out/guest.sh $out $DURATION" "$PROJECT/scripts/vm.sh"
[ -s "$out/rc" ] && [ -s "$out/left" ] || die "stress-ng: the guest did not finish (logs in $out)"
most=$(sort -n "$out/ksm.log" | tail -1)
printf '%-50s %s\n' "most pages_sharing (shared, unshared, full_scans)" "$most" \
	"full_scans at the end" "$(tail -1 "$out/ksm.log" | cut -d" " -f4)"
bad=0
while read -r what rc; do
	printf '%-50s %s\n' "stress-ng $what" "exit $rc"
	[ "$rc" = 0 ] || bad=1
done < "$out/rc"
while read -r name n; do
	printf '%-50s %s\n' "$name after run=2" "$n"
	[ "$n" = 0 ] || bad=1
done < "$out/left"
[ "$bad" = 0 ] || die "stress-ng: a stressor failed or KSM left pages (logs in $out)"
say "stress-ng: passed"
