#!/usr/bin/env python3
"""Developer helper: write kernel/patches/NNNN-*.patch from edits of pristine kernel files.

usage: mkpatch.py OUT.patch "Subject line" "body paragraph" FILE=PYTHON-EDIT ...

Each FILE is a path in the kernel tree; its pristine text comes from the tarball, and the edit is
a Python expression over `s` (the text) giving the new text. The patch carries a From/Subject/
Signed-off-by header so that scripts/checkpatch.pl can review it.
"""
import difflib
import subprocess
import sys

TARBALL = "/usr/src/linux-source-6.12.tar.xz"


def pristine(path):
    out = subprocess.run(["tar", "-xJOf", TARBALL, "linux-source-6.12/" + path],
                         capture_output=True, check=True)
    return out.stdout.decode()


def main():
    out, subject, body = sys.argv[1:4]
    diffs = []
    for arg in sys.argv[4:]:
        path, expr = arg.split("=", 1)
        s = pristine(path)
        new = eval(expr, {"s": s})
        assert new != s, "edit of %s changed nothing" % path
        diffs += difflib.unified_diff(s.splitlines(True), new.splitlines(True),
                                      "a/" + path, "b/" + path)
    with open(out, "w") as f:
        f.write("From: rksm developers <rksm@example.org>\n")
        f.write("Subject: [PATCH] %s\n\n" % subject)
        f.write(body.strip() + "\n\n")
        f.write("Signed-off-by: rksm developers <rksm@example.org>\n---\n")
        f.write("".join(diffs))


main()
