// SPDX-License-Identifier: GPL-2.0
/*
 * sparse: KSM pages scattered over a huge, sparse mergeable area, and every way of unmerging it.
 *
 * A MAP_NORESERVE anonymous area of SIZE GiB (default 1024) gets N pages (default 4096, a
 * number of pages of the kernel's size: 256 MiB written at 64 KiB) written in pairs at evenly
 * spread addresses (two pages of one page table: an unmerge must go on within a table after
 * breaking a page), so that most page tables at every level are empty. The pages
 * hold 64 contents, one of them zeroes, merged into the zero page (use_zero_pages is set). Once
 * all N pages are merged (in no more than 64 frames, /proc/self/pagemap), each way out of KSM
 * must give every page a frame of its own with its bytes intact, and leave nothing of the
 * process counted merged (ksm_merging_pages, ksm_zero_pages in /proc/self/ksm_stat):
 *
 *   madvise  MADV_UNMERGEABLE over the whole area;
 *   prctl    PR_SET_MEMORY_MERGE set before the area is mapped, then cleared;
 *   run2     `run=2` (every process's pages unmerged by the writer, with the mmap lock dropped
 *            and taken again on the way);
 *   exit     a child that merged its area exits; ksmd then forgets its pages.
 *
 * Each case prints how long the call took ("# time" lines) and how long ksmd's full scans of the
 * area took while it stayed merged: figures for the benchmark, not verdicts. A search that
 * visited every address rather than what is mapped takes minutes under an emulator for 1 TiB,
 * and fails by the caller's time limit. Prints TAP. Needs root (it drives /sys/kernel/mm/ksm).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#ifndef PR_SET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67
#endif
#define KSM "/sys/kernel/mm/ksm/"
#define CONTENTS 64
#define MERGE_SECONDS 240
#define COUNT_SECONDS 60
/* The second page of a pair, this many pages after the first. */
#define PAIR_GAP 7

static const char *const knobs[] = { "run", "sleep_millisecs", "pages_to_scan",
				     "use_zero_pages" };
static char saved[4][32];
static size_t ps, size, stride;
static long npages;
static int t;

static void read_str(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY);
	ssize_t r = fd >= 0 ? read(fd, buf, n - 1) : -1;

	buf[r > 0 ? r : 0] = 0;
	if (fd >= 0)
		close(fd);
}

/* A field of /proc/self/ksm_stat, -1 if it is missing. */
static long stat_field(const char *field)
{
	char buf[1024], *p;
	size_t n = strlen(field);

	read_str("/proc/self/ksm_stat", buf, sizeof(buf));
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, field, n) && p[n] == ' ')
			return strtol(p + n + 1, NULL, 10);
	return -1;
}

/* Puts the knobs back as they were, however the program ends. */
static void restore_knobs(void)
{
	char path[64];
	int i;

	write_str(KSM "run", "2");
	for (i = 1; i < 4; i++) {
		snprintf(path, sizeof(path), KSM "%s", knobs[i]);
		write_str(path, saved[i]);
	}
	write_str(KSM "run", saved[0]);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void ok(int cond, const char *what)
{
	printf("%sok %d - %s\n", cond ? "" : "not ", ++t, what);
	fflush(stdout);
}

static char *page(char *area, long i)
{
	return area + i / 2 * stride + i % 2 * PAIR_GAP * ps;
}

/* The value of every word of page i: content i % CONTENTS, content 0 zeroes. */
static uint64_t word(long i)
{
	return 0x0101010101010101ULL * (i % CONTENTS);
}

/* Maps the area; with `advise`, makes it mergeable by madvise. NULL on failure. */
static char *map_area(int advise)
{
	char *area = mmap(NULL, size, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (area == MAP_FAILED)
		return NULL;
	/* Small pages only: a huge page for each pair would not fit in the VM. */
	madvise(area, size, MADV_NOHUGEPAGE);
	if (advise && madvise(area, size, MADV_MERGEABLE)) {
		munmap(area, size);
		return NULL;
	}
	return area;
}

/* Writes the N pages. */
static void fill(char *area)
{
	long i;
	size_t w;

	for (i = 0; i < npages; i++) {
		uint64_t *p = (uint64_t *)page(area, i), v = word(i);

		for (w = 0; w < ps / sizeof(*p); w++)
			p[w] = v;
	}
}

/* Whether every page still holds what fill() wrote. */
static int intact(char *area)
{
	long i;
	size_t w;

	for (i = 0; i < npages; i++) {
		uint64_t *p = (uint64_t *)page(area, i), v = word(i);

		for (w = 0; w < ps / sizeof(*p); w++)
			if (p[w] != v)
				return 0;
	}
	return 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* How many distinct frames hold the N pages (/proc/self/pagemap); -1 if one is not present. */
static long frames(char *area)
{
	uint64_t *pfn = calloc(npages, sizeof(*pfn));
	int fd = open("/proc/self/pagemap", O_RDONLY);
	long i, n = pfn && fd >= 0 ? 1 : -1;

	for (i = 0; n > 0 && i < npages; i++) {
		uint64_t e;
		off_t off = (uintptr_t)page(area, i) / ps * sizeof(e);

		if (pread(fd, &e, sizeof(e), off) != sizeof(e) || !(e >> 63) ||
		    !(e & ((1ULL << 55) - 1)))
			n = -1;
		else
			pfn[i] = e & ((1ULL << 55) - 1);
	}
	if (n > 0) {
		qsort(pfn, npages, sizeof(*pfn), cmp_u64);
		for (i = 1; i < npages; i++)
			n += pfn[i] != pfn[i - 1];
	}
	if (fd >= 0)
		close(fd);
	free(pfn);
	return n;
}

/* Waits until all N pages are merged, in no more frames than contents; whether they were. */
static int wait_merged(char *area)
{
	double end = now() + MERGE_SECONDS;
	long n;

	while ((n = frames(area)) < 1 || n > CONTENTS) {
		if (now() > end)
			return 0;
		usleep(20000);
	}
	return 1;
}

/* How long ksmd's next two full scans take, in seconds, with the area merged. */
static double full_scan_seconds(void)
{
	long start = read_long(KSM "full_scans");
	double t0;

	while (read_long(KSM "full_scans") == start)
		usleep(1000);
	t0 = now();
	while (read_long(KSM "full_scans") < start + 3)
		usleep(1000);
	return (now() - t0) / 2;
}

/* Maps, fills and merges an area (by madvise, or by PR_SET_MEMORY_MERGE with `prctl_on`). */
static char *merged_area(const char *name, int prctl_on)
{
	char what[128];
	char *area;

	if (prctl_on && prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0)) {
		ok(0, "PR_SET_MEMORY_MERGE 1");
		return NULL;
	}
	area = map_area(!prctl_on);
	if (!area) {
		snprintf(what, sizeof(what), "%s: map %zu GiB", name, size >> 30);
		ok(0, what);
		return NULL;
	}
	fill(area);
	snprintf(what, sizeof(what), "%s: %ld pages spread over %zu GiB merged", name, npages,
		 size >> 30);
	ok(wait_merged(area), what);
	return area;
}

/*
 * Checks that `area` is unmerged and intact after `name`'s call, which took `secs`: each page in
 * a frame of its own at once, and the process's count of merged pages back to 0 once ksmd has
 * looked again (C and rksm both count a page off when ksmd next meets it, or at run=2).
 */
static void check_unmerged(const char *name, char *area, double secs)
{
	double end = now() + COUNT_SECONDS;
	char what[128];

	printf("# time %s %.6f s\n", name, secs);
	snprintf(what, sizeof(what), "%s: every page in a frame of its own after", name);
	ok(frames(area) == npages, what);
	while (stat_field("ksm_merging_pages") + stat_field("ksm_zero_pages") != 0 && now() < end)
		usleep(20000);
	snprintf(what, sizeof(what), "%s: nothing of the process counted merged after", name);
	ok(stat_field("ksm_merging_pages") == 0 && stat_field("ksm_zero_pages") == 0, what);
	snprintf(what, sizeof(what), "%s: every byte intact", name);
	ok(intact(area), what);
}

static void case_madvise(void)
{
	char *area = merged_area("madvise", 0);
	double t0;
	int r;

	if (!area)
		return;
	printf("# time full_scan %.6f s\n", full_scan_seconds());
	t0 = now();
	r = madvise(area, size, MADV_UNMERGEABLE);
	ok(r == 0, "madvise: MADV_UNMERGEABLE succeeds");
	check_unmerged("madvise", area, now() - t0);
	munmap(area, size);
}

static void case_prctl(void)
{
	char *area = merged_area("prctl", 1);
	double t0;
	int r;

	if (!area)
		return;
	t0 = now();
	r = prctl(PR_SET_MEMORY_MERGE, 0, 0, 0, 0);
	ok(r == 0, "prctl: PR_SET_MEMORY_MERGE 0 succeeds");
	check_unmerged("prctl", area, now() - t0);
	munmap(area, size);
}

static void case_run2(void)
{
	char *area = merged_area("run2", 0);
	double t0;
	int r;

	if (!area)
		return;
	t0 = now();
	r = write_str(KSM "run", "2");
	ok(r == 0, "run2: run=2 succeeds");
	check_unmerged("run2", area, now() - t0);
	write_str(KSM "run", "1");
	munmap(area, size);
}

static void case_exit(void)
{
	int go[2], done[2], status = 0;
	char c = 0, what[128];
	double t0, end;
	pid_t pid;

	if (pipe(go) || pipe(done)) {
		ok(0, "exit: pipes");
		return;
	}
	pid = fork();
	if (pid == 0) {
		char *area = map_area(1);

		if (area) {
			fill(area);
			c = wait_merged(area) ? 'y' : 'n';
		}
		if (write(done[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(1);
		_exit(0);
	}
	if (pid < 0 || read(done[0], &c, 1) != 1)
		c = 0;
	snprintf(what, sizeof(what), "exit: %ld pages spread over %zu GiB merged in the child",
		 npages, size >> 30);
	ok(c == 'y', what);
	t0 = now();
	if (pid > 0 && write(go[1], &c, 1) != 1)
		kill(pid, SIGKILL);
	if (pid > 0)
		waitpid(pid, &status, 0);
	printf("# time exit %.6f s\n", now() - t0);
	ok(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit: the child exits");
	/* ksmd forgets the exited process's pages: nothing merged is left anywhere. */
	end = now() + COUNT_SECONDS;
	while (read_long(KSM "pages_shared") + read_long(KSM "pages_sharing") > 0 && now() < end)
		usleep(20000);
	/* -1 + -1 if the counters cannot be read: that fails too. */
	ok(read_long(KSM "pages_shared") + read_long(KSM "pages_sharing") == 0,
	   "exit: nothing merged left after ksmd's next pass");
	close(go[0]);
	close(go[1]);
	close(done[0]);
	close(done[1]);
}

int main(int argc, char **argv)
{
	long gib = argc > 1 ? atol(argv[1]) : 1024;
	char path[64];
	int i;

	npages = argc > 2 ? atol(argv[2]) : 4096;
	ps = getpagesize();
	size = (size_t)gib << 30;
	stride = size / (npages / 2) / ps * ps;
	if (gib <= 0 || npages < CONTENTS || npages % 2 || stride < (PAIR_GAP + 1) * ps) {
		fprintf(stderr, "usage: sparse [GiB [pages]], an even number of at least %d pages\n",
			CONTENTS);
		return 2;
	}
	printf("TAP version 13\n1..18\n");
	printf("# %ld pages of %zu bytes, two every %zu bytes of a %ld GiB area\n", npages, ps,
	       stride, gib);
	for (i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), KSM "%s", knobs[i]);
		read_str(path, saved[i], sizeof(saved[i]));
	}
	atexit(restore_knobs);
	if (write_str(KSM "run", "2") || write_str(KSM "sleep_millisecs", "0") ||
	    write_str(KSM "pages_to_scan", "10000") || write_str(KSM "use_zero_pages", "1") ||
	    write_str(KSM "run", "1")) {
		printf("Bail out! cannot set the KSM knobs\n");
		return 1;
	}
	case_madvise();
	case_prctl();
	case_run2();
	case_exit();
	return 0;
}
