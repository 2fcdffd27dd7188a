#!/usr/bin/env bash
# make kunit: boot the rksm kernel with its built-in KUnit suites enabled (the kernel crate's
# doctests and rksm's suites), print their KTAP output and a table. KUNIT_FILTER selects suites.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

set +e
KSM=rust KUNIT=1 QUIET=1 VM_RUN=$B/vm/kunit CMD=true "$PROJECT/scripts/vm.sh"
rc=$?
set -e
sed -n 's/^\[ *[0-9.]*\] \?//; /KTAP version/,$p' "$B/vm/kunit/console.log" |
	grep -E '^ *(KTAP|#|ok|not ok|[0-9]+\.\.)' || true
python3 "$PROJECT/tests/report.py" --kunit "$B/vm/kunit/console.log" || rc=1
exit $rc
