// SPDX-License-Identifier: GPL-2.0
/*
 * Development probe (scripts/dev/u-trace.sh): what upstream ksm_tests -U does, with trace_marker
 * lines at each of its steps, so that a failing run can be read against ksmd's trace events.
 * Exits 1 if KSM pages are counted after one full scan that followed the writes.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <fcntl.h>
static int tm = -1;
static void mark(const char *s) { if (tm >= 0) write(tm, s, strlen(s)); }
static long rd(const char *f) { char p[128], b[64]; snprintf(p, sizeof p, "/sys/kernel/mm/ksm/%s", f); int fd = open(p, O_RDONLY); int n = read(fd, b, 63); close(fd); b[n > 0 ? n : 0] = 0; return atol(b); }
static void wr(const char *f, long v) { char p[128], b[64]; snprintf(p, sizeof p, "/sys/kernel/mm/ksm/%s", f); int fd = open(p, O_WRONLY); int n = snprintf(b, sizeof b, "%ld", v); write(fd, b, n); close(fd); }
int main(void)
{
	long ps = getpagesize(), f;
	tm = open("/sys/kernel/tracing/trace_marker", O_WRONLY);
	wr("run", 2); wr("sleep_millisecs", 0); wr("pages_to_scan", 100);
	char *m = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(m, '*', 2 * ps);
	madvise(m, 2 * ps, MADV_MERGEABLE);
	wr("run", 1);
	f = rd("full_scans");
	while (rd("full_scans") < f + 2) ;
	mark("U: merged wait done\n");
	memset(m, '-', 1);
	mark("U: wrote page 0\n");
	memset(m + ps, '+', 1);
	mark("U: wrote page 1\n");
	f = rd("full_scans");
	while (rd("full_scans") < f + 1) ;
	long sh = rd("pages_shared"), sg = rd("pages_sharing");
	char b[128]; snprintf(b, sizeof b, "U: check f=%ld shared %ld sharing %ld\n", f, sh, sg); mark(b);
	printf("%s", b);
	wr("run", 0);
	return sh || sg;
}
