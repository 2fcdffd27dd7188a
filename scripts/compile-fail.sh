#!/usr/bin/env bash
# make test's compile-fail suite: misuses of the kernel crate's abstractions that must not compile.
# Each tests/compile_fail/*.rs is compiled, as a crate of its own, against the kernel crate of the
# last rksm test kernel build (build/obj), with the very rustc command kbuild used for rksm's
# crate; it must fail with the error code its "// expect:" line names, with the words that follow
# the code in rustc's message (which say why), or compile if that line says "compiles" (the
# control, which shows that the command works). Prints TAP.
#
# These are not `compile_fail` doctests because 6.12's rustdoc_test_builder compiles every
# doctest of the kernel crate into the KUnit doctests, so one that must not compile breaks the
# build (6.12's rust/kernel/init.rs says the same).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
OBJ=${OBJ:-$B/obj}
cmdfile=$OBJ/samples/rust/rksm/.rksm.o.cmd
[ -f "$cmdfile" ] || die "no $cmdfile: build the rksm test kernel first"
# The command kbuild ran for rksm's crate, without its name, outputs and source.
cmd=$(sed -n 's/^savedcmd_[^ ]* := RUST_MODFILE=[^ ]* //p' "$cmdfile" |
	sed -e 's/ --crate-name rksm / /' -e 's/ --out-dir [^ ]* / /' -e 's/ --emit=[^ ]*//g' \
		-e 's/ [^ ]*\/rksm\.rs *$//')
[ -n "$cmd" ] || die "cannot read the rustc command from $cmdfile"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cases=("$PROJECT"/tests/compile_fail/*.rs)
echo "1..${#cases[@]}"
n=0
fail=0
for f in "${cases[@]}"; do
	n=$((n + 1))
	name=$(basename "$f" .rs)
	expect=$(sed -n 's|^// expect: *||p' "$f" | head -1)
	code=${expect%% *}
	words=${expect#"$code"}
	words=${words# }
	set +e
	out=$(cd "$OBJ" && RUSTC_BOOTSTRAP=1 eval "$cmd --crate-name cf_$name --emit=metadata --out-dir $tmp $f" 2>&1)
	rc=$?
	set -e
	if [ "$expect" = compiles ]; then
		if [ $rc -eq 0 ]; then
			echo "ok $n - $name: compiles"
		else
			echo "not ok $n - $name: does not compile"
			sed 's/^/# /' <<< "$out" | head -20
			fail=1
		fi
	elif [ $rc -ne 0 ] && grep -q "error\[$code\]" <<< "$out" && grep -qF -- "$words" <<< "$out"; then
		echo "ok $n - $name: refused ($code)"
	else
		echo "not ok $n - $name: expected $expect, rustc exited $rc"
		sed 's/^/# /' <<< "$out" | head -20
		fail=1
	fi
done
exit $fail
