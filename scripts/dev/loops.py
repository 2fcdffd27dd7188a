#!/usr/bin/env python3
"""Development tool: which loops of the named functions straddle a 4 KiB page of a vmlinux.

Under TCG, a translation block ends at a page boundary and is not chained to the next one, so a
hot loop that straddles a page runs at about half speed (see scripts/kernel.sh). For each
backward jump of each function (a loop), prints its span and whether it crosses a page.

  scripts/dev/loops.py build/obj-bench/vmlinux memcmp xxh64 compare_from checksum
"""

import re
import subprocess
import sys

OBJDUMP = "/usr/lib/llvm-19/bin/llvm-objdump"


def symbols(vmlinux, wanted):
    out = subprocess.run(["nm", vmlinux], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        w = line.split()
        if len(w) == 3 and w[1] in "tT" and any(
                w[2] == n or (n in w[2] and w[2].startswith("_R")) for n in wanted):
            yield w[2]


def loops(vmlinux, sym):
    out = subprocess.run([OBJDUMP, "-d", "--no-show-raw-insn", vmlinux,
                          "--disassemble-symbols=" + sym], capture_output=True, text=True).stdout
    insns = []
    for line in out.splitlines():
        m = re.match(r"\s*([0-9a-f]{16}):\s+(\S+)\s*(.*)", line)
        if m:
            insns.append((int(m.group(1), 16), m.group(2), m.group(3)))
    for i, (addr, op, args) in enumerate(insns):
        m = re.match(r"(0x)?([0-9a-f]+)", args)
        if op.startswith("j") and m:
            target = int(m.group(2), 16)
            end = insns[i + 1][0] if i + 1 < len(insns) else addr + 2
            if target <= addr:
                yield target, end


def main():
    vmlinux, names = sys.argv[1], sys.argv[2:]
    bad = 0
    for sym in sorted(set(symbols(vmlinux, names))):
        for start, end in loops(vmlinux, sym):
            crosses = (start >> 12) != ((end - 1) >> 12)
            bad += crosses
            print("%-60s loop %x-%x (%3d bytes)%s" % (sym[-60:], start, end, end - start,
                                                       "  CROSSES A PAGE" if crosses else ""))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
