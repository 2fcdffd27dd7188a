#!/usr/bin/env bash
# make series: the whole of rksm as a patch series that `git am` applies to Linux 6.12.117, with a
# cover letter, in build/series/: the fixes first (the two to C KSM, kernel/patches/0001-0002, each
# standing alone; the three to User-Mode Linux, 0006, 0007 and 0009; arm64's link with ld.lld,
# 0008), then the kernel crate's additions with their C helpers (0004 and rust/), the Kconfig
# choice with rksm itself and its KUnit suites (0003, samples/, tests/kunit/), the documentation
# (0005, Documentation/).
# Each patch goes through scripts/checkpatch.pl --strict; what it says is in
# build/series/checkpatch.txt and counted in the cover letter.
#
# The base is a git repository of the pristine tarball (build/series-git, tag v6.12.117, made
# once). CHECK=1 (make test) then applies the series just written to that base with `git am`, and
# checks that it gives exactly the source tree the tests built (build/linux): every file the
# series changes equals the tree's, and it changes exactly the files the tree has from the project.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

REPO=$B/series-git
OUT=$B/series
BASE=v6.12.117
PREPARE=1 "$PROJECT/scripts/kernel.sh"

# Fixed identities and dates: the same project commit gives the same series.
DATE=$(git -C "$PROJECT" log -1 --format=%cI 2>/dev/null || date -u +%FT%TZ)
export GIT_AUTHOR_NAME="rksm developers" GIT_AUTHOR_EMAIL=rksm@example.org
export GIT_COMMITTER_NAME="rksm developers" GIT_COMMITTER_EMAIL=rksm@example.org
export GIT_AUTHOR_DATE=$DATE GIT_COMMITTER_DATE=$DATE
g() { git -C "$REPO" -c core.autocrlf=false -c am.threeWay=false "$@"; }

# The pristine base, once per tarball.
key=$(stat -c '%n %s %Y' "$TARBALL")
if [ "$(cat "$REPO/.git/rksm-base" 2>/dev/null)" != "$key" ]; then
	say "series: a git repository of $(basename "$TARBALL") (build/series-git, once)"
	rm -rf "$REPO"
	mkdir -p "$REPO"
	tar -xf "$TARBALL" -C "$REPO" --strip-components=1
	g init -q
	# -f: the tarball's .gitignore (Debian's) ignores everything at the top level.
	g add -f -A
	GIT_AUTHOR_DATE=2000-01-01T00:00:00Z GIT_COMMITTER_DATE=2000-01-01T00:00:00Z \
		g commit -q -m "Linux 6.12.117 (linux-source-$KVER tarball)"
	g tag "$BASE"
	echo "$key" > "$REPO/.git/rksm-base"
fi

# Copies the project's files under the tree paths that start with one of the given prefixes into
# the repository, and stages them.
add_files() {
	local p t pre
	while read -r p t; do
		for pre in "$@"; do
			case $t in "$pre"*)
				mkdir -p "$REPO/$(dirname "$t")"
				cp "$PROJECT/$p" "$REPO/$t"
				g add -f -- "$t" ;;
			esac
		done
	done < <(tree_map)
}

# Applies one of kernel/patches/ (by number) and, with prefixes, adds those files to its commit.
patch_with() {
	local n=$1 p
	shift
	p=$(ls "$PROJECT"/kernel/patches/"$n"-*.patch)
	g am -q --keep-cr "$p" || { g am --abort || true; die "$(basename "$p") does not apply"; }
	if [ $# -gt 0 ]; then
		add_files "$@"
		g commit -q --amend --no-edit
	fi
}

say "series: kernel/patches and the project's files on $BASE"
g am --abort >/dev/null 2>&1 || true
g checkout -q -f -B rksm-series "$BASE"
g clean -q -fdx
patch_with 0001
patch_with 0002
patch_with 0006
patch_with 0007
patch_with 0009
patch_with 0008
patch_with 0004 rust/
patch_with 0003 samples/
patch_with 0005 Documentation/
[ -z "$(g status --porcelain)" ] || die "series: files left out of the series: $(g status --porcelain | head)"

rm -rf "$OUT"
mkdir -p "$OUT"
g format-patch -q --cover-letter -o "$OUT" "$BASE"..rksm-series
n=$(ls "$OUT"/0*.patch | grep -vc 0000-cover-letter)

# checkpatch.pl --strict on every patch, from the tree the series applies to.
: > "$OUT/checkpatch.txt"
for p in "$OUT"/0*.patch; do
	case $p in *0000-cover-letter.patch) continue ;; esac
	{
		echo "=== $(basename "$p")"
		(cd "$REPO" && perl scripts/checkpatch.pl --strict --no-signoff --terse --show-types "$p") || true
	} >> "$OUT/checkpatch.txt" 2>&1
done
summary=$(grep -E '^total: ' "$OUT/checkpatch.txt" | awk '{e += $2; w += $4; c += $6} END {printf "%d errors, %d warnings, %d checks", e, w, c}')

# The cover letter, which says why each kind of report checkpatch.pl still makes stays. A report
# of a kind with no reason here fails make series.
python3 - "$OUT"/0000-cover-letter.patch "$OUT"/checkpatch.txt <<'EOF'
import collections
import re
import sys
import textwrap

REASONS = {
    "FILE_PATH_CHANGES": "new files, and no MAINTAINERS entry: who would maintain rksm upstream "
                         "is for the mm and Rust for Linux maintainers to say, not this series",
    "DEFINE_ARCH_HAS": "ARCH_HAS_PREFETCH is the interface of include/linux/prefetch.h, which "
                       "every architecture with a prefetch() of its own defines (x86's "
                       "processor.h too); the rule is against new ARCH_HAS_ symbols",
}
path, report = sys.argv[1], sys.argv[2]
found = collections.OrderedDict()
patch = None
for line in open(report):
    if line.startswith("=== "):
        patch = line[4:].strip()
    m = re.search(r": (?:ERROR|WARNING|CHECK):([A-Z_]+):", line)
    if m:
        found.setdefault(m.group(1), []).append(int(patch.split("-")[0]))
unexplained = [t for t in found if t not in REASONS]
why = "checkpatch.pl --strict: no reports."
if found:
    why = "checkpatch.pl --strict reports, each kind with why it stays:\n" + "\n".join(
        textwrap.fill("%s (patch %s): %s" % (t, ", ".join(str(n) for n in sorted(set(ps))),
                                             REASONS.get(t, "NO REASON GIVEN")),
                      width=72, initial_indent="  ", subsequent_indent="    ")
        for t, ps in found.items())
text = open(path).read()
text = text.replace("*** SUBJECT HERE ***", "rksm: Kernel Samepage Merging in Rust")
text = text.replace("*** BLURB HERE ***", """\
rksm reimplements Kernel Samepage Merging (mm/ksm.c) in Rust, with the
same contract: madvise(MADV_MERGEABLE), prctl(PR_SET_MEMORY_MERGE),
/sys/kernel/mm/ksm and /proc/<pid>/ksm_stat behave as C KSM's do. A
Kconfig choice (patch 8) selects one implementation or the other, so one
tree and one configuration build both kernels.

Patches 1 and 2 fix C KSM and stand alone: a maintainer can take them
without the rest. Their reproducers are in the rksm repository:
  1: tests/vm/torture.c (forks and run=2 flips: ksm_zero_pages drifts),
  2: tests/vm/ksmrace.c zeroes (KASAN slab-use-after-free with
     SLUB_RCU_DEBUG, within two minutes).
Patches 3 to 5 fix User-Mode Linux on x86 (the native timings run on
it); patch 6 lets ld.lld link arm64 kernels whose early page tables it
could not size (the 16K-page debug kernel the arm64 torture runs on).
Patch 7 adds the kernel crate's abstractions rksm uses, patch 8 rksm
and its KUnit suites, patch 9 the documentation
(Documentation/admin-guide/mm/rksm.rst for operators,
Documentation/mm/rksm.rst for the design).

""" + why)
open(path, "w").write(text)
if unexplained:
    sys.exit("series: checkpatch.pl --strict reports with no reason given: %s (see %s)"
             % (", ".join(unexplained), report))
EOF
say "series: $n patches and a cover letter in build/series/ (checkpatch --strict: $summary)"

# kernel/upstream/: fixes to C KSM that rksm's tests found and the series does not apply, as the
# C kernels the tests compare with stay 6.12.117's KSM (with only 0001-0002). Each must pass
# checkpatch.pl --strict with no report, but for the Fixes: tag's commit id, which the tarball's
# one-commit history cannot know.
upstream=$(ls "$PROJECT"/kernel/upstream/*.patch 2>/dev/null || true)
: > "$OUT/upstream-checkpatch.txt"
for p in $upstream; do
	(cd "$REPO" && perl scripts/checkpatch.pl --strict --terse --show-types \
		--ignore UNKNOWN_COMMIT_ID "$p") >> "$OUT/upstream-checkpatch.txt" 2>&1 ||
		{ cat "$OUT/upstream-checkpatch.txt" >&2; die "series: checkpatch.pl reports $(basename "$p")"; }
done

[ "${CHECK:-0}" = 1 ] || exit 0

# The check: the series as written, applied with git am to the pristine base, is the tree the
# tests built.
say "series: git am build/series/ on a pristine $BASE, compared with build/linux"
g checkout -q -f -B rksm-check "$BASE"
g clean -q -fdx
for p in "$OUT"/0*.patch; do
	case $p in *0000-cover-letter.patch) continue ;; esac
	g am -q --keep-cr "$p" || { g am --abort || true; die "series: $(basename "$p") does not apply with git am"; }
done
diffs=0
changed=$(g diff --name-only "$BASE" rksm-check | sort)
expected=$({ tree_map | awk '{print $2}'
	for p in "$PROJECT"/kernel/patches/*.patch; do
		sed -n 's|^+++ b/\(.*\)|\1|p' "$p"
	done; } | sort -u)
if [ "$changed" != "$expected" ]; then
	echo "series: it changes other files than the tree has from the project:" >&2
	diff <(echo "$expected") <(echo "$changed") | sed 's/^/  /' | head -20 >&2
	diffs=1
fi
while read -r f; do
	[ -n "$f" ] || continue
	if ! cmp -s "$REPO/$f" "$SRC/$f"; then
		echo "series: $f differs from build/linux/$f" >&2
		diffs=1
	fi
done <<< "$changed"
[ $diffs = 0 ] || die "series: git am of build/series/ does not give the tree the tests built"
say "series: applies with git am and gives build/linux's tree ($(echo "$changed" | wc -l) files)"

# Each of kernel/upstream/ applies on the series and on the pristine base alone.
for base in rksm-check "$BASE"; do
	g checkout -q -f "$base"
	for p in $upstream; do
		g apply --check "$p" || die "series: kernel/upstream/$(basename "$p") does not apply on $base"
	done
done
[ -z "$upstream" ] || say "series: kernel/upstream/'s $(echo "$upstream" | wc -l) patches apply on the series and on $BASE"
