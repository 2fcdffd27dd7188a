#!/bin/sh
# Runs inside the test VM (see scripts/test.sh): every guest-side suite against the running
# kernel. Each command's output and exit status land in build/test/$1/<suite>/<name>.{out,rc};
# tests/report.py turns them into the verdict. Always exits 0: a failing test is a result.
set -u
kernel=$1
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

# The kernel's own KSM selftests, unmodified, every mode.
run ksm_tests M          300 "$st/ksm_tests" -M
run ksm_tests M_t1       300 "$st/ksm_tests" -M -t 1
run ksm_tests U          300 "$st/ksm_tests" -U
run ksm_tests Z_z0       300 "$st/ksm_tests" -Z -z 0
run ksm_tests Z_z1       300 "$st/ksm_tests" -Z -z 1
run ksm_tests N_m1       300 "$st/ksm_tests" -N -m 1
run ksm_tests N_m0       300 "$st/ksm_tests" -N -m 0
run ksm_tests P          600 "$st/ksm_tests" -P -s 64
run ksm_tests H          600 "$st/ksm_tests" -H -s 64
run ksm_tests C          300 "$st/ksm_tests" -C
run ksm_functional_tests all 600 "$st/ksm_functional_tests"

# rksm's own workloads: full merge, every byte back, COW privacy, unmerge.
for mode in best worst prefix; do
	for procs in 2 3; do
		run workloads "${mode}_x$procs" 900 python3 "$top/tests/vm/ksmrun.py" --tap --quiet \
			--mode $mode --procs $procs --mib 16 --cow --unmerge
	done
done
run workloads random_x2 900 python3 "$top/tests/vm/ksmrun.py" --tap --quiet --mode random --procs 2 --mib 16

echo "[$kernel] $n commands done"
