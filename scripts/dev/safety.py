#!/usr/bin/env python3
"""Lists `unsafe` blocks and impls in the given Rust files that have no `// SAFETY:` comment on the
lines just before them (or on the same line). Exit status 1 if any."""
import re
import sys

bad = 0
for path in sys.argv[1:]:
    lines = open(path).read().splitlines()
    for n, line in enumerate(lines):
        code = line.split("//")[0]
        if not re.search(r"\bunsafe\s*(\{|impl\b)", code):
            continue
        window = lines[max(0, n - 12):n + 1]
        # The nearest comment block above must hold SAFETY (comments may span several lines).
        ok = False
        for prev in reversed(window[:-1]):
            s = prev.strip()
            if s.startswith("//"):
                if "SAFETY" in s:
                    ok = True
                    break
                continue
            if s.startswith("#[") or s == "":
                continue
            # The start of the same statement, wrapped by rustfmt (`let x =` on its own line).
            if s.endswith("=") or s.endswith("("):
                continue
            # A code line: the comment may also sit above a statement that contains the block.
            if "SAFETY" in s:
                ok = True
            break
        if "SAFETY" in line:
            ok = True
        if not ok:
            print("%s:%d: %s" % (path, n + 1, line.strip()))
            bad += 1
sys.exit(1 if bad else 0)
