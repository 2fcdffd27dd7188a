#!/bin/sh
# TAP: the running kernel's KSM is the one it was built with. On the rksm kernel none of the
# functions of mm/ksm.c's scanner below exists (static ones that the compiler keeps out of line)
# and rksm's do; on the C kernel the other way round.
kernel=${1%%-*}
c_syms="ksm_scan_thread break_ksm ksm_get_folio remove_rmap_item_from_tree try_to_merge_with_ksm_page remove_all_stable_nodes"
c_found=$(awk -v want=" $c_syms " 'index(want, " " $3 " ") { print $3 }' /proc/kallsyms | sort -u | tr '\n' ' ')
rksm_found=$(grep -c 'rksm.*scan' /proc/kallsyms)
echo "1..2"
if [ "$kernel" = rust ]; then
	[ -z "$c_found" ] && r=ok || r="not ok"
	echo "$r 1 no C KSM scanner in /proc/kallsyms (found: ${c_found:-none})"
	[ "$rksm_found" -gt 0 ] && r=ok || r="not ok"
	echo "$r 2 rksm's scanner is in /proc/kallsyms ($rksm_found symbols)"
else
	[ "$(echo "$c_found" | wc -w)" = 6 ] && r=ok || r="not ok"
	echo "$r 1 C KSM's scanner is in /proc/kallsyms (found: ${c_found:-none})"
	[ "$rksm_found" = 0 ] && r=ok || r="not ok"
	echo "$r 2 no rksm scanner in /proc/kallsyms ($rksm_found symbols)"
fi
