// SPDX-License-Identifier: GPL-2.0
/*
 * Development probe (scripts/dev/u-trace.sh): what upstream ksm_tests -U does, with trace_marker
 * lines at each of its steps, so that a failing run can be read against ksmd's trace events.
 * Exits 1 if KSM pages are counted after one full scan that followed the writes.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int marker = -1;

static void mark(const char *s)
{
	if (marker >= 0 && write(marker, s, strlen(s)) < 0)
		perror("trace_marker");
}

static long knob(const char *name)
{
	char path[128], buf[64];
	int fd, n;

	snprintf(path, sizeof(path), "/sys/kernel/mm/ksm/%s", name);
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		perror(path);
		exit(2);
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return atol(buf);
}

static void set_knob(const char *name, long v)
{
	char path[128], buf[64];
	int fd, n;

	snprintf(path, sizeof(path), "/sys/kernel/mm/ksm/%s", name);
	n = snprintf(buf, sizeof(buf), "%ld", v);
	fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, buf, n) != n) {
		perror(path);
		exit(2);
	}
	close(fd);
}

/* Waits until full_scans has moved by n from what it reads now; gives that first reading. */
static long wait_scans(long n)
{
	long f = knob("full_scans");

	while (knob("full_scans") < f + n)
		;
	return f;
}

int main(void)
{
	long ps = getpagesize(), f, shared, sharing;
	char line[128];
	char *m;

	marker = open("/sys/kernel/tracing/trace_marker", O_WRONLY);
	set_knob("run", 2);
	set_knob("sleep_millisecs", 0);
	set_knob("pages_to_scan", 100);
	m = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	memset(m, '*', 2 * ps);
	if (madvise(m, 2 * ps, MADV_MERGEABLE)) {
		perror("madvise");
		return 2;
	}
	set_knob("run", 1);
	wait_scans(2);
	mark("U: merged wait done\n");
	memset(m, '-', 1);
	mark("U: wrote page 0\n");
	memset(m + ps, '+', 1);
	mark("U: wrote page 1\n");
	f = wait_scans(1);
	shared = knob("pages_shared");
	sharing = knob("pages_sharing");
	snprintf(line, sizeof(line), "U: check f=%ld shared %ld sharing %ld\n", f, shared, sharing);
	mark(line);
	printf("%s", line);
	set_knob("run", 0);
	return shared || sharing;
}
