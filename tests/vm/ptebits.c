// SPDX-License-Identifier: GPL-2.0
/*
 * ptebits: a KSM merge keeps the write-tracking bits of the page table entries it replaces.
 *
 * N equal anonymous pages are written after clear_refs (so each is soft-dirty), write-protected
 * through userfaultfd (so each entry carries uffd-wp), then made mergeable. Once every page maps
 * one frame, /proc/self/pagemap must still show each page soft-dirty (bit 55: a checkpoint that
 * trusts it must not skip a page written since the last one) and uffd-wp protected (bit 57).
 * Then a thread writes to every page: each write must reach the userfaultfd handler first, as
 * QEMU's background snapshot needs (it saves a page before the guest may change it), and every
 * page must read back as written. A kernel without soft-dirty tracking (arm64: no "sd" among the
 * area's VmFlags) must show no page soft-dirty, and the uffd-wp bits are checked alone.
 *
 * Modes (the one argument):
 *   (none)   the pages hold 0x5a bytes and merge into one KSM page;
 *   zero     the pages are zero-filled and use_zero_pages is set: each is mapped to the zero page;
 *   unmerge  as (none), then MADV_UNMERGEABLE gives every page a copy of its own again, before
 *            the bits and the writes are checked (the kernel's unsharing fault carries both bits
 *            into the copy's entry, if the merged entry still had them).
 *
 * C KSM's replace_page() (6.12) maps the KSM page, or the zero page, by a new entry without
 * either bit, so every page but the one that became the KSM page loses them (with the zero page,
 * every page): tests/report.py expects that on C. Prints TAP. Needs root (it drives
 * /sys/kernel/mm/ksm).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define N 64
#define PM_SOFT_DIRTY (1ULL << 55)
#define PM_UFFD_WP (1ULL << 57)
#define PM_PRESENT (1ULL << 63)
#define PFN_MASK ((1ULL << 55) - 1)
#define KSM "/sys/kernel/mm/ksm/"

static const char *const knobs[] = { "run", "sleep_millisecs", "pages_to_scan",
				     "use_zero_pages" };
static char saved[4][32];
static char *area;
static long ps;
static char fill;

static void read_str(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY);
	ssize_t r = fd >= 0 ? read(fd, buf, n - 1) : -1;

	buf[r > 0 ? r : 0] = 0;
	if (r > 0 && buf[r - 1] == '\n')
		buf[r - 1] = 0;
	if (fd >= 0)
		close(fd);
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

static int bail(const char *what)
{
	printf("Bail out! %s failed\n", what);
	return 1;
}

/* Writes one byte to every page, in order. */
static void *writer(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < N; i++)
		area[i * ps] = (char)i;
	return NULL;
}

/* Whether every page is present and maps one frame (page 0's, nonzero). */
static int one_frame(const uint64_t *pm)
{
	int i, same = (pm[0] & PM_PRESENT) && (pm[0] & PFN_MASK);

	for (i = 1; i < N; i++)
		same &= (pm[i] & PM_PRESENT) && (pm[i] & PFN_MASK) == (pm[0] & PFN_MASK);
	return same;
}

/* Whether every page is present and no two share a frame. */
static int all_apart(const uint64_t *pm)
{
	int i, j;

	for (i = 0; i < N; i++) {
		if (!(pm[i] & PM_PRESENT) || !(pm[i] & PFN_MASK))
			return 0;
		for (j = 0; j < i; j++)
			if ((pm[i] & PFN_MASK) == (pm[j] & PFN_MASK))
				return 0;
	}
	return 1;
}

/*
 * Whether the kernel tracks soft-dirty bits (CONFIG_MEM_SOFT_DIRTY, which arm64 lacks): a new
 * area is marked soft-dirty as a whole, which smaps shows as "sd" among its VmFlags.
 */
static int tracks_soft_dirty(const void *addr)
{
	char line[512], want[32];
	int in = 0, sd = 0;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return 1;
	snprintf(want, sizeof(want), "%lx-", (unsigned long)addr);
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, want, strlen(want)))
			in = 1;
		else if (in && !strncmp(line, "VmFlags:", 8)) {
			sd = strstr(line, " sd") != NULL;
			break;
		}
	}
	fclose(f);
	return sd;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	int zero = !strcmp(mode, "zero"), unmerge = !strcmp(mode, "unmerge"), t = 0;
	struct uffdio_writeprotect wpr = { 0 };
	struct uffdio_register reg = { 0 };
	struct uffdio_api api = { 0 };
	unsigned char seen[N] = { 0 };
	char path[64];
	uint64_t pm[N];
	int pmfd, uffd, i, j, merged = 0, apart = 1, sd = 0, wp = 0, faults = 0, good = 0;
	int tracked, want_sd;
	pthread_t th;
	time_t end;

	if (argc > 2 || (argc == 2 && !zero && !unmerge)) {
		fprintf(stderr, "usage: %s [zero|unmerge]\n", argv[0]);
		return 2;
	}
	fill = zero ? 0 : 0x5a;
	ps = sysconf(_SC_PAGESIZE);
	for (i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), KSM "%s", knobs[i]);
		read_str(path, saved[i], sizeof(saved[i]));
	}
	printf("TAP version 13\n1..%d\n", unmerge ? 7 : 6);
	/* Page frame numbers read as 0 without CAP_SYS_ADMIN: every page would look merged. */
	if (geteuid() != 0)
		return bail("running as root");
	atexit(restore_knobs);
	area = mmap(NULL, N * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pmfd = open("/proc/self/pagemap", O_RDONLY);
	uffd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (area == MAP_FAILED || pmfd < 0 || uffd < 0)
		return bail("mmap, pagemap or userfaultfd");
	api.api = UFFD_API;
	api.features = UFFD_FEATURE_PAGEFAULT_FLAG_WP;
	if (ioctl(uffd, UFFDIO_API, &api))
		return bail("UFFDIO_API with write-protection");
	/* Before clear_refs, which clears the area's soft-dirty mark. */
	tracked = tracks_soft_dirty(area);
	if (write_str("/proc/self/clear_refs", "4"))
		return bail("clear_refs");
	for (i = 0; i < N; i++)
		memset(area + i * ps, fill, ps);
	reg.range.start = wpr.range.start = (unsigned long)area;
	reg.range.len = wpr.range.len = N * ps;
	reg.mode = UFFDIO_REGISTER_MODE_WP;
	wpr.mode = UFFDIO_WRITEPROTECT_MODE_WP;
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) || ioctl(uffd, UFFDIO_WRITEPROTECT, &wpr))
		return bail("UFFDIO_REGISTER or UFFDIO_WRITEPROTECT");
	if (pread(pmfd, pm, sizeof(pm), (unsigned long)area / ps * 8) != sizeof(pm))
		return bail("reading pagemap");
	for (i = 0; i < N; i++) {
		sd += !!(pm[i] & PM_SOFT_DIRTY);
		wp += !!(pm[i] & PM_UFFD_WP);
	}
	want_sd = tracked ? N : 0;
	printf("%sok %d before merging, %d of %d pages are soft-dirty and %d uffd-wp protected%s\n",
	       sd == want_sd && wp == N ? "" : "not ", ++t, sd, N, wp,
	       tracked ? "" : " (this kernel tracks no soft-dirty bit: no sd in VmFlags)");

	if (write_str(KSM "run", "2") || write_str(KSM "use_zero_pages", zero ? "1" : "0") ||
	    write_str(KSM "sleep_millisecs", "0") || write_str(KSM "pages_to_scan", "1000") ||
	    write_str(KSM "run", "1"))
		return bail("setting the KSM knobs");
	if (madvise(area, N * ps, MADV_MERGEABLE))
		return bail("MADV_MERGEABLE");
	for (end = time(NULL) + 120; !merged && time(NULL) < end; usleep(50000)) {
		if (pread(pmfd, pm, sizeof(pm), (unsigned long)area / ps * 8) != sizeof(pm))
			return bail("reading pagemap");
		merged = one_frame(pm);
	}
	/* Nothing more merges or unmerges while the bits and the writes are checked. */
	write_str(KSM "run", "0");
	printf("%sok %d all %d pages merged into one frame%s\n", merged ? "" : "not ", ++t, N,
	       zero ? ", the zero page" : "");
	if (unmerge) {
		if (madvise(area, N * ps, MADV_UNMERGEABLE))
			return bail("MADV_UNMERGEABLE");
		if (pread(pmfd, pm, sizeof(pm), (unsigned long)area / ps * 8) != sizeof(pm))
			return bail("reading pagemap");
		apart = all_apart(pm);
		printf("%sok %d unmerged, each of %d pages has a frame of its own again\n",
		       apart ? "" : "not ", ++t, N);
	}
	for (sd = wp = i = 0; i < N; i++) {
		sd += !!(pm[i] & PM_SOFT_DIRTY);
		wp += !!(pm[i] & PM_UFFD_WP);
	}
	if (tracked)
		printf("%sok %d %s, %d of %d pages are still soft-dirty\n", sd == N ? "" : "not ",
		       ++t, unmerge ? "merged and unmerged" : "merged", sd, N);
	else
		printf("%sok %d %s, %d of %d pages soft-dirty: this kernel tracks no soft-dirty bit\n",
		       sd == 0 ? "" : "not ", ++t, unmerge ? "merged and unmerged" : "merged", sd, N);
	printf("%sok %d %s, %d of %d pages are still uffd-wp protected\n", wp == N ? "" : "not ",
	       ++t, unmerge ? "merged and unmerged" : "merged", wp, N);

	/* Every write must fault to this handler first: it notes the page and unprotects it. */
	if (pthread_create(&th, NULL, writer, NULL))
		return bail("pthread_create");
	for (end = time(NULL) + 30; time(NULL) < end;) {
		struct pollfd pfd = { .fd = uffd, .events = POLLIN };
		struct uffd_msg msg;

		if (((volatile char *)area)[(N - 1) * ps] == (char)(N - 1))
			break;
		if (poll(&pfd, 1, 100) <= 0 || read(uffd, &msg, sizeof(msg)) != sizeof(msg))
			continue;
		if (msg.event != UFFD_EVENT_PAGEFAULT ||
		    !(msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP))
			continue;
		i = (msg.arg.pagefault.address - (unsigned long)area) / ps;
		if (i >= 0 && i < N)
			seen[i] = 1;
		wpr.range.start = msg.arg.pagefault.address & ~(ps - 1);
		wpr.range.len = ps;
		wpr.mode = 0;
		if (ioctl(uffd, UFFDIO_WRITEPROTECT, &wpr))
			return bail("UFFDIO_WRITEPROTECT (unprotect)");
	}
	/* If the handler gave up, a write may still wait for it: unprotect all, so it goes on. */
	wpr.range.start = (unsigned long)area;
	wpr.range.len = N * ps;
	wpr.mode = 0;
	ioctl(uffd, UFFDIO_WRITEPROTECT, &wpr);
	pthread_join(th, NULL);
	for (i = 0; i < N; i++)
		faults += seen[i];
	for (i = 0; i < N; i++) {
		int ok = area[i * ps] == (char)i;

		for (j = 1; ok && j < ps; j++)
			ok = area[i * ps + j] == fill;
		good += ok;
	}
	printf("%sok %d each of %d writes faulted to userfaultfd first (%d pages did)\n",
	       faults == N ? "" : "not ", ++t, N, faults);
	printf("%sok %d %d of %d pages read back as written\n", good == N ? "" : "not ", ++t, good,
	       N);

	return !(merged && apart && sd == want_sd && wp == N && faults == N && good == N);
}
