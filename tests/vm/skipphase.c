// SPDX-License-Identifier: GPL-2.0
/*
 * Smart scan must not keep equal pages apart for good.
 *
 * Smart scanning (/sys/kernel/mm/ksm/smart_scan, on by default) looks at a page that has not
 * merged for a while only every few passes: after its third look, every second, third, fifth
 * and at last every ninth pass (C's skip_age()). Two pages meet in the unstable tree only in a
 * pass that looks at both. An area A of pages with contents of their own is made mergeable
 * and left until its pages are looked at every ninth pass; areas B0..B8 likewise, Bj made
 * mergeable j + 1 passes after A, so that each is looked at in passes of its own phase. Each
 * area is made mergeable in ksmd's sleep just after a pass ends, so these offsets are exact: when
 * ksmd did not sleep, passes could end unseen and C's pairs fell in phase by chance. Then
 * page i of A and page i of every Bj are given the same new contents (a different content for
 * each i), and KSM gets a number of full scans to merge them. KSM's contract is that equal
 * mergeable pages merge; a scanner that keeps each page's skipping schedule across a change of
 * contents merges a page of A and one of a Bj only in a pass that looks at both.
 *
 * With all nine Bj, two of the ten areas share a phase, merge, and the rest join their KSM
 * pages through the stable tree, which lasts across passes. With one Bj ("skipphase 1 200"),
 * A and B0 are pairs only: on 6.12.117's C KSM, and on rksm before it looked at pages by the
 * pass number (item::looks_at), none of the 16 pairs merged in 200 full scans
 * (Documentation/mm/rksm-measurements.rst, "Smart scan keeps pairs apart"); with
 * "skipphase 9 200" both merged all 160 pages. make test runs "skipphase" on both kernels:
 * C's failure is expected (tests/report.py's C_DEFECTS).
 *
 * Usage: skipphase [B_AREAS [FULL_SCANS]] (default 1 and 200). TAP output; needs root. Knobs
 * are put back as they were.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>
#include "util.h"

#define PHASES 9 /* C's longest skip is 8 passes */
#define N 16 /* pages in A and in each Bj */
/*
 * ksmd's sleep between passes (a pass looks at all pages at once): long enough that a pass's
 * end is seen, and an area made mergeable, before the next pass starts.
 */
#define SLEEP_MS 50

static long page_size;
static int failed;

static void check(int ok, const char *what)
{
	static int n;

	printf("%sok %d - %s\n", ok ? "" : "not ", ++n, what);
	failed |= !ok;
}

/* Waits for n more full scans: full_scans then, or -1 after a minute without one. */
static long wait_scans(long n)
{
	long want = ksm_knob("full_scans") + n, last = -1;
	time_t since = time(NULL);

	for (;;) {
		long now = ksm_knob("full_scans");

		if (now >= want)
			return now;
		if (now != last) {
			last = now;
			since = time(NULL);
		} else if (time(NULL) - since > 60) {
			return -1;
		}
		usleep(1000);
	}
}

/* The frame mapped at p (root reads it from /proc/self/pagemap); 0 if none. */
static uint64_t frame(const void *p)
{
	static int fd = -1;
	uint64_t e = 0;

	if (fd < 0)
		fd = open("/proc/self/pagemap", O_RDONLY);
	if (fd < 0 || pread(fd, &e, sizeof(e), (uintptr_t)p / page_size * sizeof(e)) != sizeof(e))
		return 0;
	return e >> 63 & 1 ? e & ((1ULL << 55) - 1) : 0;
}

/*
 * Makes the n pages at p mergeable right after the next pass ends: 1 if no pass ended meanwhile
 * (so the pass after that one is their first look), 0 if one did, -1 if KSM makes no passes.
 */
static int mergeable_after_pass(char *p, long n)
{
	long seen = wait_scans(1);

	if (seen < 0)
		return -1;
	madvise(p, n * page_size, MADV_MERGEABLE);
	return ksm_knob("full_scans") == seen;
}

static void fill(char *p, uint64_t v)
{
	for (long j = 0; j < page_size / 8; j++)
		((uint64_t *)p)[j] = v ^ (uint64_t)j * 0x9e3779b97f4a7c15ULL;
}

static char *area(uint64_t seed)
{
	char *a = mmap(NULL, N * page_size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (a == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	for (int i = 0; i < N; i++)
		fill(a + i * page_size, seed + i);
	return a;
}

/* Whether every page of A and of the Bj holds its new contents. */
static int intact(const char *a, int nb, char * const *b)
{
	char *want = malloc(page_size);
	int ok = want != NULL;

	for (int i = 0; ok && i < N; i++) {
		fill(want, 5000 + i);
		ok = !memcmp(a + i * page_size, want, page_size);
		for (int j = 0; ok && j < nb; j++)
			ok = !memcmp(b[j] + i * page_size, want, page_size);
	}
	free(want);
	return ok;
}

int main(int argc, char **argv)
{
	/* How many B areas (default 1: pairs only), and the full scans given to merge them. */
	int nb = argc > 1 ? atoi(argv[1]) : 1, passes = argc > 2 ? atoi(argv[2]) : 200;
	static const char * const names[] = { "run", "sleep_millisecs", "pages_to_scan", "smart_scan" };
	long saved[ARRAY_SIZE(names)], merged, want;
	int exact = 1;
	char *a, *b[PHASES];

	page_size = getpagesize();
	if (nb < 1 || nb > PHASES || passes < 1)
		return 2;
	want = (long)N * (nb + 1);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		saved[i] = ksm_knob(names[i]);
	ksm_set_knob("run", 2);
	ksm_set_knob("sleep_millisecs", SLEEP_MS);
	ksm_set_knob("pages_to_scan", 10000);
	check(!ksm_set_knob("smart_scan", 1), "smart scanning on");
	ksm_set_knob("run", 1);

	/*
	 * A first, then each Bj one pass later than the last: every page's contents its own. Each
	 * area is made mergeable just after a pass ends, in ksmd's sleep, so that the next pass is
	 * its first look, whatever the timing of this process against ksmd's.
	 */
	a = area(1000);
	for (int j = 0; j < nb; j++)
		b[j] = area(2000 + 100 * j);
	/* ksmd makes passes only while some mm is mergeable: a page of its own, that never merges. */
	madvise(area(9000), page_size, MADV_MERGEABLE);
	for (int j = -1; j < nb; j++) {
		int r = mergeable_after_pass(j < 0 ? a : b[j], N);

		if (r < 0) {
			check(0, "KSM makes full scans");
			goto out;
		}
		exact &= r;
	}
	check(exact, "each area made mergeable before another pass ended (the offsets are exact)");
	/* Long enough for every page to be looked at only every ninth pass. */
	if (wait_scans(60) < 0) {
		check(0, "KSM makes full scans");
		goto out;
	}
	check(read_long("/proc/self/ksm_merging_pages") == 0, "nothing merged before");
	printf("# pages_skipped %ld before the new contents\n", ksm_knob("pages_skipped"));

	/* Page i of A and of every Bj equal now. */
	for (int i = 0; i < N; i++) {
		fill(a + i * page_size, 5000 + i);
		for (int j = 0; j < nb; j++)
			fill(b[j] + i * page_size, 5000 + i);
	}
	wait_scans(passes);
	merged = read_long("/proc/self/ksm_merging_pages");
	/* Which of the Bj merged with A: page i of Bj maps page i of A's frame. */
	printf("# pages of Bj on the frame of A's page, j = 0..%d:", nb - 1);
	for (int j = 0; j < nb; j++) {
		int m = 0;

		for (int i = 0; i < N; i++)
			m += frame(b[j] + i * page_size) && frame(b[j] + i * page_size) ==
				frame(a + i * page_size);
		printf(" %d", m);
	}
	printf("\n");
	printf("# %ld of %ld pages merged after %d full scans (smart_scan on)\n", merged, want,
	       passes);
	check(merged == want, "equal pages merge whatever their skipping schedules");
	check(intact(a, nb, b), "every page reads as written");
out:
	ksm_set_knob("run", 2);
	for (int i = ARRAY_SIZE(names) - 1; i >= 0; i--)
		if (saved[i] >= 0)
			ksm_set_knob(names[i], saved[i]);
	printf("1..5\n");
	return failed;
}
