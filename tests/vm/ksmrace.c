// SPDX-License-Identifier: GPL-2.0
/*
 * ksmrace: regression tests aimed at the windows of races found by reading rksm against mm/ksm.c
 * (issue 20). Each scenario opens its window as wide and as often as it can within a time budget
 * and fails if the kernel lost, corrupted or mis-mapped anything; a use-after-free shows as a
 * splat in the kernel log, which fails the VM run (scripts/vm.sh), best on the debug kernels.
 *
 *   register   an address space whose mergeable areas were all unmapped registers a new one
 *              at once (MADV_MERGEABLE): the new area must merge. rksm once dropped the address
 *              space after looking at it without its mmap lock, so that a madvise in between
 *              saw it registered, did not register it again, and its area was never scanned.
 *   migrate    merged pages migrate between the NUMA nodes without pause while run=2 unmerges
 *              everything and run=1 merges it again: every byte stays right, and no KSM page or
 *              splat is left. rksm once took a KSM page whose lock it waited for to be stale
 *              when migration had moved its node to a copy meanwhile, and freed the node that
 *              the copy still pointed at.
 *   release    a forked child migrates merged pages without pause while the parent's mappings
 *              leave their stable nodes: the child reads every byte right, nothing is left.
 *              rksm once took the KSM page it waited to lock for gone when migration had
 *              moved it meanwhile.
 *   bystander  pages that went into the unstable tree are freed and their frames taken by
 *              another process's transparent huge pages before the pages' partners are scanned:
 *              the other process's huge pages must stay whole and exact. rksm once split the
 *              huge page at a frame an unstable tree item remembered before checking that the
 *              item still mapped it.
 *   offline    merged pages in ZONE_MOVABLE, the memory blocks holding their KSM pages offlined
 *              and onlined again: still merged, every byte right, nothing left after run=2
 *              (memory hot-remove, which rksm once did not support).
 *   advisor    with advisor_mode=scan-time and two scanner threads, the CPU time the advisor
 *              reports for its passes (the ksm_advisor trace event) is what every scanner
 *              thread spent, as /proc shows it. rksm once counted ksmd's time alone.
 *   zeroes     with use_zero_pages, areas of zero pages are unmapped and mapped again at the
 *              same address by several processes while two scanner threads merge them with
 *              the zero page: every byte reads zero, and ksm_zero_pages is 0 once they exited.
 *              rksm once read the freed anon_vma of a page its batch held after the page was
 *              unmapped (KASAN, in page_address_in_vma()).
 *   noinit     on a kernel booted with rksm's init left out (initcall_blacklist=__rksm_init):
 *              MADV_MERGEABLE fails with EAGAIN and PR_SET_MEMORY_MERGE with ENOMEM, the rest
 *              works. rksm
 *              once panicked there (its global state was reached through an expect()).
 *
 * Usage: ksmrace SCENARIO [SECONDS]. Prints TAP; exits 0 only if every check passed. Needs
 * root: it drives /sys/kernel/mm/ksm (and restores what it changed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define KSM "/sys/kernel/mm/ksm/"
#define HPAGE_PMD_SIZE "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size"
#define MPOL_MF_MOVE_ALL (1 << 2)
#ifndef PR_SET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67
#define PR_GET_MEMORY_MERGE 68
#endif

/* The kernel's page size, set first thing in main(). */
static size_t PAGE;
static int tests, failures;

static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d - ", ok ? "" : "not ", ++tests);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	failures += !ok;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long merging_pages(void)
{
	return read_long("/proc/self/ksm_merging_pages");
}

/* The knobs a scenario changes, saved to be put back. */
static const char * const saved_names[] = { "run", "sleep_millisecs", "pages_to_scan",
					    "merge_across_nodes", "smart_scan" };
#define NR_SAVED ARRAY_SIZE(saved_names)
static long saved[NR_SAVED];

static void save_knobs(void)
{
	for (size_t i = 0; i < NR_SAVED; i++)
		saved[i] = ksm_knob(saved_names[i]);
}

static void restore_knobs(void)
{
	ksm_set_knob("run", 2);
	for (int i = NR_SAVED - 1; i >= 0; i--)
		if (saved[i] >= 0)
			ksm_set_knob(saved_names[i], saved[i]);
}

static void *map_pages(size_t n)
{
	void *p = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	return p;
}

/* Fills page i of `p` with the 64-bit value `v(i)` repeated. */
static void fill(char *p, size_t n, uint64_t (*v)(size_t, uint64_t), uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t *w = (uint64_t *)(p + i * PAGE);

		for (size_t j = 0; j < PAGE / 8; j++)
			w[j] = v(i, seed);
	}
}

/* The first page of `p` whose bytes are not `v(i)` repeated, or -1. */
static long first_wrong(const char *p, size_t n, uint64_t (*v)(size_t, uint64_t), uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		const uint64_t *w = (const uint64_t *)(p + i * PAGE);

		for (size_t j = 0; j < PAGE / 8; j++)
			if (w[j] != v(i, seed))
				return i;
	}
	return -1;
}

/* Waits until at least `want` of this process's pages are merged; false after `secs`. */
static int wait_merged(long want, double secs)
{
	double end = now() + secs;

	while (merging_pages() < want) {
		if (now() > end)
			return 0;
		usleep(2000);
	}
	return 1;
}

static uint64_t same(size_t i, uint64_t seed)
{
	(void)i;
	return seed;
}

/*
 * register: A (NA equal pages) merges; A is unmapped; after a random delay, B (NB equal pages)
 * is mapped and made mergeable at once. ksmd's next look at the address space finds no
 * mergeable area if it comes before B, and removes it from its list: B's madvise must then
 * register it again, or B never merges.
 */
static void scenario_register(double budget)
{
	const size_t NA = 2048, NB = 16;
	double end = now() + budget;
	int rounds = 0, lost = 0, unmerged_a = 0;
	unsigned int seed = getpid();

	ksm_set_knob("run", 1);
	ksm_set_knob("sleep_millisecs", 0);
	ksm_set_knob("pages_to_scan", 10000);
	while (now() < end && !lost) {
		char *a = map_pages(NA), *b;
		long sc;

		fill(a, NA, same, 0x1000 + rounds);
		madvise(a, NA * PAGE, MADV_MERGEABLE);
		if (!wait_merged(NA / 2, 20)) {
			unmerged_a++;
			munmap(a, NA * PAGE);
			break;
		}
		munmap(a, NA * PAGE);
		usleep(rand_r(&seed) % 20000);
		b = map_pages(NB);
		fill(b, NB, same, 0x2000 + rounds);
		madvise(b, NB * PAGE, MADV_MERGEABLE);
		/* B merges within a few passes; a lost registration has no passes at all. */
		sc = ksm_knob("full_scans");
		while (merging_pages() < (long)NB / 2 && ksm_knob("full_scans") < sc + 8 &&
		       now() < end + 30)
			usleep(2000);
		if (merging_pages() < (long)NB / 2) {
			lost++;
			printf("# round %d: the new area never merged (full_scans %ld -> %ld)\n", rounds,
			       sc, ksm_knob("full_scans"));
		}
		munmap(b, NB * PAGE);
		rounds++;
	}
	printf("# register: %d rounds\n", rounds);
	check(!unmerged_a, "register: the first area merged every round");
	check(!lost, "register: a new area merges after the last one was unmapped (%d rounds)",
	      rounds);
	check(rounds >= 5, "register: at least 5 rounds in the time given (%d)", rounds);
}

/* migrate: NPAGES pages, 64 contents, migrated without pause while run flips 2 -> 1. */
#define MIG_PAGES 1024
static char *mig_area;
static volatile int mig_stop;
static long mig_moved, mig_ksm_moved, mig_errors;

static uint64_t mig_value(size_t i, uint64_t seed)
{
	return seed ^ (i % 64) * 0x9e3779b97f4a7c15ULL;
}

/* Reads the frames of the `n` pages at `p` (0 where none is mapped) from pagemap. */
static void read_frames(int pagemap, const char *p, size_t n, uint64_t *frames)
{
	if (pread(pagemap, frames, n * 8, (uintptr_t)p / PAGE * 8) != (ssize_t)(n * 8))
		memset(frames, 0, n * 8);
	for (size_t i = 0; i < n; i++)
		frames[i] = frames[i] >> 63 ? frames[i] & ((1ULL << 55) - 1) : 0;
}

/* Whether `f` occurs in `frames` other than at `i` (a page this process maps twice: merged). */
static int frame_shared(const uint64_t *frames, size_t n, size_t i)
{
	for (size_t j = i % 64; j < n; j += 64)
		if (j != i && frames[j] == frames[i])
			return 1;
	return 0;
}

/*
 * Moves the MIG_PAGES pages at `area` to the other node and back without pause until `*stop`,
 * merged pages too (MPOL_MF_MOVE_ALL: MPOL_MF_MOVE leaves a page mapped more than once where
 * it is, and every KSM page here is), adding to `*moved` the pages that moved and to
 * `*ksm_moved` the KSM pages seen to move: pages mapped at two addresses of the area both
 * before and after the call, on another frame after it. Returns the number of failed calls.
 */
static long migrate_until(char *area, volatile int *stop, long *moved, long *ksm_moved)
{
	static uint64_t before[MIG_PAGES], after[MIG_PAGES];
	void *pages[MIG_PAGES];
	int nodes[MIG_PAGES], status[MIG_PAGES];
	int to = 1, pagemap = open("/proc/self/pagemap", O_RDONLY);
	long errors = 0;

	for (size_t i = 0; i < MIG_PAGES; i++)
		pages[i] = area + i * PAGE;
	while (!*stop) {
		for (size_t i = 0; i < MIG_PAGES; i++)
			nodes[i] = to;
		read_frames(pagemap, area, MIG_PAGES, before);
		for (size_t i = 0; i < MIG_PAGES; i++)
			status[i] = -1;
		if (syscall(SYS_move_pages, 0, MIG_PAGES, pages, nodes, status, MPOL_MF_MOVE_ALL) < 0) {
			errors++;
		} else {
			read_frames(pagemap, area, MIG_PAGES, after);
			for (size_t i = 0; i < MIG_PAGES; i++) {
				*moved += status[i] == to;
				/* Merged before and after, on another frame, on the target
				 * node (an unmerge by run=2 in between leaves it unshared).
				 */
				*ksm_moved += status[i] == to && before[i] && after[i] &&
					      after[i] != before[i] &&
					      frame_shared(before, MIG_PAGES, i) &&
					      frame_shared(after, MIG_PAGES, i);
			}
		}
		to ^= 1;
	}
	close(pagemap);
	return errors;
}

static void *migrator(void *arg)
{
	(void)arg;
	mig_errors = migrate_until(mig_area, &mig_stop, &mig_moved, &mig_ksm_moved);
	return NULL;
}

static void scenario_migrate(double budget)
{
	double end = now() + budget;
	pthread_t t;
	int rounds = 0, wrong = 0, merged_rounds = 0, run_errors = 0;
	long left;

	if (read_long("/sys/devices/system/node/node1/cpu1/online") < 0 &&
	    access("/sys/devices/system/node/node1", F_OK) != 0) {
		check(0, "migrate: needs two NUMA nodes");
		return;
	}
	ksm_set_knob("sleep_millisecs", 0);
	ksm_set_knob("pages_to_scan", 10000);
	mig_area = map_pages(MIG_PAGES);
	fill(mig_area, MIG_PAGES, mig_value, 0x5eed);
	madvise(mig_area, MIG_PAGES * PAGE, MADV_MERGEABLE);
	pthread_create(&t, NULL, migrator, NULL);
	while (now() < end) {
		long w;

		if (ksm_set_knob("run", 1))
			run_errors++;
		merged_rounds += wait_merged(MIG_PAGES / 2, 10);
		/* Unmerge everything while the pages keep moving. */
		if (ksm_set_knob("run", 2))
			run_errors++;
		w = first_wrong(mig_area, MIG_PAGES, mig_value, 0x5eed);
		if (w >= 0) {
			wrong++;
			printf("# round %d: page %ld reads wrong\n", rounds, w);
		}
		rounds++;
	}
	mig_stop = 1;
	pthread_join(t, NULL);
	ksm_set_knob("run", 2);
	left = ksm_knob("pages_shared") + ksm_knob("pages_sharing");
	printf("# migrate: %d rounds, %ld pages moved (%ld merged), %ld move_pages errors\n", rounds,
	       mig_moved, mig_ksm_moved, mig_errors);
	check(!wrong, "migrate: every byte right after each unmerge (%d rounds)", rounds);
	check(merged_rounds * 2 >= rounds, "migrate: the pages merged in most rounds (%d of %d)",
	      merged_rounds, rounds);
	check(mig_moved > 0, "migrate: pages were migrated (%ld)", mig_moved);
	check(mig_ksm_moved > 0, "migrate: merged pages were migrated (%ld)", mig_ksm_moved);
	check(!run_errors, "migrate: every run write succeeded");
	check(left == 0, "migrate: no KSM page left after run=2 (%ld)", left);
	munmap(mig_area, MIG_PAGES * PAGE);
}

/*
 * release: merged pages that a forked child maps and migrates without pause while the
 * parent's mappings leave their stable nodes (the parent unmaps its area, and ksmd takes its
 * rmap_items off, each under the lock of its node's KSM page, which migration may be copying
 * at that moment). The nodes and the child's mappings must stay right: the child reads every
 * byte right, and nothing is left after run=2. rksm once took the page it waited to lock for
 * gone when migration had moved it to a copy meanwhile, and took the node's mappings off.
 */
static void scenario_release(double budget)
{
	volatile long *shared = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
				     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int rounds = 0, merged_rounds = 0, child_failed = 0;
	long moved = 0, ksm_moved = 0, left;
	double end = now() + budget;

	if (access("/sys/devices/system/node/node1", F_OK) != 0 || shared == MAP_FAILED) {
		check(0, "release: needs two NUMA nodes");
		return;
	}
	ksm_set_knob("sleep_millisecs", 0);
	ksm_set_knob("pages_to_scan", 10000);
	ksm_set_knob("run", 1);
	while (now() < end) {
		char *a = map_pages(MIG_PAGES);
		long sc;
		pid_t pid;
		int st = 0;

		fill(a, MIG_PAGES, mig_value, 0x5eed + rounds);
		madvise(a, MIG_PAGES * PAGE, MADV_MERGEABLE);
		merged_rounds += wait_merged(MIG_PAGES / 2, 10);
		shared[0] = 0;
		pid = fork();
		if (pid == 0) {
			long m = 0, km = 0;

			migrate_until(a, (volatile int *)&shared[0], &m, &km);
			shared[1] += m;
			shared[2] += km;
			_exit(first_wrong(a, MIG_PAGES, mig_value, 0x5eed + rounds) >= 0);
		}
		/*
		 * The child migrates; the parent's mappings leave their nodes meanwhile: ksmd takes
		 * them off at its next look, each under its node's page lock.
		 */
		usleep(10000);
		munmap(a, MIG_PAGES * PAGE);
		sc = ksm_knob("full_scans");
		while (ksm_knob("full_scans") < sc + 2 && now() < end + 30)
			usleep(20000);
		shared[0] = 1;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
			child_failed++;
			printf("# round %d: the child %s\n", rounds,
			       WIFSIGNALED(st) ? "was killed" : "read a wrong page");
		}
		rounds++;
	}
	moved = shared[1];
	ksm_moved = shared[2];
	ksm_set_knob("run", 2);
	left = ksm_knob("pages_shared") + ksm_knob("pages_sharing");
	printf("# release: %d rounds, the children moved %ld pages (%ld merged)\n", rounds, moved,
	       ksm_moved);
	check(!child_failed, "release: every child read every byte right (%d of %d rounds failed)",
	      child_failed, rounds);
	check(merged_rounds * 2 >= rounds, "release: the pages merged in most rounds (%d of %d)",
	      merged_rounds, rounds);
	check(ksm_moved > 0, "release: the children migrated merged pages (%ld)", ksm_moved);
	check(left == 0, "release: no KSM page left after run=2 (%ld)", left);
	munmap((void *)shared, PAGE);
}

/*
 * bystander: X (NX pages, 32 MiB, that begin with 128 zero bytes, then one value each) goes
 * into the unstable tree in one batch of ksmd (pages_to_scan = NX, a long sleep after it); X's
 * pages are then freed (MADV_DONTNEED: the area stays) and a bystander process fills
 * transparent huge pages, which begin with 128 zero bytes too, over most of free memory, taking
 * X's frames; then ksmd is woken for its next batch, Y, X's twins, which find X's items by their
 * checksums. The bystander's huge pages must stay whole (AnonHugePages) and exact.
 */
static uint64_t bys_value(size_t i, uint64_t seed)
{
	return seed + i * 0x100000001b3ULL;
}

/* Page i: 16 zero words, then bys_value(i, seed) repeated. */
static void fill_prefixed(char *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t *w = (uint64_t *)(p + i * PAGE);

		for (size_t j = 0; j < PAGE / 8; j++)
			w[j] = j < 16 ? 0 : bys_value(i, seed);
	}
}

static long first_wrong_prefixed(const char *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		const uint64_t *w = (const uint64_t *)(p + i * PAGE);

		for (size_t j = 0; j < PAGE / 8; j++)
			if (w[j] != (j < 16 ? 0 : bys_value(i, seed)))
				return i;
	}
	return -1;
}

static long meminfo_kb(const char *path, const char *field)
{
	char line[256], fmt[64];
	long kb = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	snprintf(fmt, sizeof(fmt), "%s: %%ld kB", field);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, fmt, &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static long anon_huge_kb(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
	return meminfo_kb(path, "AnonHugePages");
}

/* The size of a PMD-mapped transparent huge page, or 0 where the kernel has none. */
static size_t hpage_size(void)
{
	long size = read_long(HPAGE_PMD_SIZE);

	return size > 0 ? size : 0;
}

/*
 * A counter of PMD-sized huge pages in the kernel's per-size statistics, or -1. (The test
 * kernels have no /proc/vmstat events: CONFIG_VM_EVENT_COUNTERS is off.)
 */
static long thp_stat(const char *name)
{
	char path[160];

	snprintf(path, sizeof(path), "/sys/kernel/mm/transparent_hugepage/hugepages-%ldkB/stats/%s",
		 read_long(HPAGE_PMD_SIZE) / 1024, name);
	return read_long(path);
}

/*
 * The bystander: huge pages over most of free memory; says 'r' when filled, checks on 'v'.
 * Its memory is locked once filled: the debug boots swap to zram, and kswapd, woken by the
 * bystander's own huge page faults, could otherwise swap its huge pages out (so that
 * AnonHugePages drops) while Y's batch runs. A lock does not stop a split.
 */
static void huge_owner(int ready, int go)
{
	/* Without transparent huge pages, small ones: the check of AnonHugePages then fails. */
	const size_t huge = hpage_size() ?: PAGE;
	size_t len = (size_t)(meminfo_kb("/proc/meminfo", "MemFree") * 1024 * 6 / 10) & ~(huge - 1);
	char *h = mmap(NULL, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *a = (char *)(((uintptr_t)h + huge - 1) & ~(huge - 1));
	long bad;
	char c = 'r';

	if (h == MAP_FAILED)
		_exit(3);
	madvise(a, len, MADV_HUGEPAGE);
	fill_prefixed(a, len / PAGE, 0x77);
	if (mlock(a, len))
		printf("# the bystander could not lock its memory: %s\n", strerror(errno));
	if (write(ready, &c, 1) != 1 || read(go, &c, 1) != 1)
		_exit(3);
	bad = first_wrong_prefixed(a, len / PAGE, 0x77);
	if (bad >= 0)
		printf("# the bystander's page %ld reads wrong\n", bad);
	_exit(bad >= 0);
}

static void scenario_bystander(double budget)
{
	/* An amount of memory: X's frames are what the bystander's huge pages are to take. */
	const size_t NX = (32UL << 20) / PAGE;
	double end = now() + budget;
	int rounds = 0, split = 0, wrong = 0, huge_rounds = 0, timely = 0;

	ksm_set_knob("merge_across_nodes", 1);
	while (now() < end) {
		/* X then Y in one area, so that ksmd meets X's pages first in each pass. */
		char *xy = map_pages(2 * NX), *y = xy + NX * PAGE;
		/* The kernel's counters of what can take huge pages from a process. */
		static const char *const took[] = { "split", "split_failed", "swpout",
						    "swpout_fallback" };
		long before, after, unshared, sc, moved[4];
		int p[2], q[2], st;
		pid_t pid;
		char c;

		fill_prefixed(xy, NX, 0x1000 * (rounds + 1));
		fill_prefixed(y, NX, 0x1000 * (rounds + 1));
		ksm_set_knob("run", 2);
		ksm_set_knob("sleep_millisecs", 60000);
		ksm_set_knob("pages_to_scan", NX);
		madvise(xy, 2 * NX * PAGE, MADV_MERGEABLE);
		ksm_set_knob("run", 1);
		/* Pass 1 takes checksums; pass 2's first batch puts X into the unstable tree. */
		sc = ksm_knob("pages_scanned");
		ksm_set_knob("sleep_millisecs", 0);
		while (ksm_knob("pages_scanned") < sc + 2 * (long)NX && now() < end + 60)
			usleep(500);
		ksm_set_knob("sleep_millisecs", 60000);
		while (ksm_knob("pages_scanned") < sc + 3 * (long)NX && now() < end + 60)
			usleep(1000);
		unshared = ksm_knob("pages_unshared");
		sc = ksm_knob("pages_scanned");
		madvise(xy, NX * PAGE, MADV_DONTNEED);
		if (pipe(p) || pipe(q))
			exit(2);
		pid = fork();
		if (!pid)
			huge_owner(p[1], q[0]);
		if (read(p[0], &c, 1) != 1)
			exit(2);
		before = anon_huge_kb(pid);
		huge_rounds += before > 0;
		for (int i = 0; i < 4; i++)
			moved[i] = thp_stat(took[i]);
		/* Y's batch, now: ksmd wakes when sleep_millisecs changes. */
		timely += ksm_knob("pages_scanned") == sc;
		ksm_set_knob("sleep_millisecs", 1);
		while (ksm_knob("pages_scanned") < sc + (long)NX && now() < end + 60)
			usleep(2000);
		ksm_set_knob("sleep_millisecs", 60000);
		after = anon_huge_kb(pid);
		/* What moved anywhere meanwhile: who took them. */
		for (int i = 0; i < 4; i++)
			moved[i] = thp_stat(took[i]) - moved[i];
		if (after < before) {
			split++;
			printf("# round %d: the bystander's huge pages went from %ld to %ld kB\n",
			       rounds, before, after);
			printf("# round %d: meanwhile %s +%ld, %s +%ld, %s +%ld, %s +%ld\n", rounds,
			       took[0], moved[0], took[1], moved[1], took[2], moved[2], took[3],
			       moved[3]);
		}
		c = 'v';
		if (write(q[1], &c, 1) != 1)
			exit(2);
		waitpid(pid, &st, 0);
		wrong += !WIFEXITED(st) || WEXITSTATUS(st);
		close(p[0]);
		close(p[1]);
		close(q[0]);
		close(q[1]);
		printf("# round %d: X in the unstable tree (%ld), bystander %ld -> %ld kB huge\n",
		       rounds, unshared, before, after);
		munmap(xy, 2 * NX * PAGE);
		rounds++;
	}
	check(huge_rounds > 0 && timely > 0,
	      "bystander: the bystander got huge pages before Y's batch (%d, %d of %d rounds)",
	      huge_rounds, timely, rounds);
	check(!split, "bystander: its huge pages stayed whole (%d of %d rounds split)", split, rounds);
	check(!wrong, "bystander: every byte of its memory right");
}

/*
 * offline: merged pages on node 1, whose last memory blocks are ZONE_MOVABLE (the VM boots
 * with kernelcore=1536M: 768 MiB of each node's 1 GiB in the kernel's zones, the rest
 * movable and aligned to memory blocks), the blocks that hold their KSM pages offlined and
 * onlined again through /sys/devices/system/memory, in rounds. A filler first takes node 1's
 * free pages outside a block that can go offline, so that the pages land there. Each round
 * moves the pages back to node 1 (offlining moved them away) and unmaps a slice of the pairs,
 * so that the blocks also hold the frames of freed KSM pages whose stable nodes may not be
 * pruned yet; the slice is mapped, filled and merged again after the blocks are back.
 * Offlining migrates the KSM pages out of the blocks: the rest must stay merged (their stable
 * nodes follow them), every byte read back right, and no KSM page be left after run=2.
 */
/* A number of pages (1024 pairs to merge), whatever their size: 128 MiB at 64 KiB. */
#define OFF_PAGES 2048

static uint64_t off_value(size_t i, uint64_t seed)
{
	return seed ^ ((i % (OFF_PAGES / 2)) * 0x9e3779b97f4a7c15ULL);
}

/*
 * The time an offlining of the rounds gets (the probe gets 90 s);
 * OFFLINE_SECS=0 in the environment shows the time-out's path.
 */
static int offline_secs = 90;

/* util.h's set_block_bounded(), with KSM's counters printed on time out. */
static int set_block_bounded_ksm(long block, const char *state, int secs)
{
	int err = set_block_bounded(block, state, secs);

	if (err == ETIMEDOUT)
		printf("# pages_shared %ld, pages_sharing %ld, stable_node_chains %ld, full_scans %ld\n",
		       ksm_knob("pages_shared"), ksm_knob("pages_sharing"), ksm_knob("stable_node_chains"),
		       ksm_knob("full_scans"));
	errno = err;
	return err;
}

/* Fills pages [from, to) of the offline area. */
static void off_fill(char *a, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		for (size_t j = 0; j < PAGE / 8; j++)
			((uint64_t *)(a + i * PAGE))[j] = off_value(i, 0xabcd);
}

/*
 * The pairs of the offline area (page i and page i + OFF_PAGES / 2, equal) mapped on one frame:
 * merged, as the page tables say it now, where ksm_merging_pages drops a page unmapped only when
 * the scanner next passes.
 */
static long off_merged_pairs(int pagemap, const char *a, uint64_t *frames)
{
	long n = 0;

	read_frames(pagemap, a, OFF_PAGES, frames);
	for (size_t i = 0; i < OFF_PAGES / 2; i++)
		n += frames[i] && frames[i] == frames[i + OFF_PAGES / 2];
	return n;
}

/* The first page of [from, to) that reads wrong, or -1. */
static long off_wrong(const char *a, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		for (size_t j = 0; j < PAGE / 8; j++)
			if (((const uint64_t *)(a + i * PAGE))[j] != off_value(i, 0xabcd))
				return i;
	return -1;
}

/*
 * The first memory block of node 1 that is online, movable and can go offline (offlined and
 * onlined again to find out: a block with holes, as the one under the firmware's tables at the
 * top of node 1, gives EINVAL), or -1.
 */
static long offlinable_block(void)
{
	DIR *d = opendir("/sys/devices/system/node/node1");
	long best = -1;
	struct dirent *e;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		long b;

		if (sscanf(e->d_name, "memory%ld", &b) != 1 || (best >= 0 && b > best) ||
		    !block_attr_is(b, "state", "online") || !block_attr_is(b, "valid_zones", "Movable"))
			continue;
		if (set_block_bounded_ksm(b, "offline", 90))
			continue;
		if (set_block(b, "online_movable") && set_block(b, "online")) {
			printf("# block %ld went offline and could not be onlined again\n", b);
			continue;
		}
		best = b;
	}
	closedir(d);
	return best;
}

/*
 * Takes node 1's free pages, one at a time, until one comes from block `t`: pages that node 1
 * gives next come from `t` too (once a block is onlined again its pages are handed out last, so
 * without this the test's pages may all land in another block). Returns the filler area of
 * `*n` pages, for the caller to unmap.
 */
static char *fill_until_block(int pagemap, long t, long bsize, size_t *n)
{
	/* At most 256 MiB of node 1's 1 GiB, whatever the page size. */
	const size_t max = (256UL << 20) / PAGE;
	unsigned long node1 = 2;
	char *f = mmap(NULL, max * PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uint64_t frame;
	size_t i;

	*n = 0;
	if (f == MAP_FAILED)
		return NULL;
	syscall(SYS_mbind, f, max * PAGE, 2 /* MPOL_BIND */, &node1, 64, 0);
	for (i = 0; i < max; i++) {
		f[i * PAGE] = 1;
		read_frames(pagemap, f + i * PAGE, 1, &frame);
		if (frame && (long)(frame * PAGE / bsize) == t)
			break;
	}
	*n = max;
	if (i < max)
		printf("# filler: %zu pages before one came from block %ld\n", i, t);
	else
		printf("# filler: none of its %zu pages came from block %ld\n", max, t);
	return f;
}

static void scenario_offline(double budget)
{
	static uint64_t frames[OFF_PAGES];
	static void *pages[OFF_PAGES];
	static int nodes[OFF_PAGES], status[OFF_PAGES];
	const size_t half = OFF_PAGES / 2, slice = OFF_PAGES / 8;
	long bsize = 0, blocks[OFF_PAGES], offlined = 0, onlined = 0, nblocks;
	int pagemap = open("/proc/self/pagemap", O_RDONLY), moved = 0, remerged = 0, rounds = 0;
	int wrong = 0, offline_rounds = 0, timed_out = 0, w;
	long round_offlined = 0, before, after;
	double end = now() + budget;
	unsigned long node1 = 2;
	char *a, *filler;
	size_t nfiller;
	long target;
	long left;

	bsize = memory_block_size();
	if (bsize <= 0 || pagemap < 0 || access("/sys/devices/system/node/node1", F_OK)) {
		check(0, "offline: memory blocks, pagemap and node 1 are there");
		return;
	}
	ksm_set_knob("run", 2);
	ksm_set_knob("sleep_millisecs", 0);
	ksm_set_knob("pages_to_scan", 10000);
	ksm_set_knob("merge_across_nodes", 1);
	/*
	 * Without smart scanning: each slice refilled is pairs of equal pages only, and a pair
	 * whose two pages smart scanning looks at in different passes never merges on C 6.12
	 * (nor on rksm before item::looks_at; tests/vm/skipphase.c checks it). C's items of the
	 * unmapped slice outlive the offlining, during which ksmd waits, and keep their skipping
	 * schedules: its 4K arm64 run failed this way (Documentation/mm/rksm-measurements.rst,
	 * "Smart scan keeps pairs apart"). This scenario is about offlining, on both kernels.
	 */
	ksm_set_knob("smart_scan", 0);
	if (getenv("OFFLINE_SECS"))
		offline_secs = atoi(getenv("OFFLINE_SECS"));
	target = offlinable_block();
	check(target >= 0, "offline: node 1 has a movable block that can go offline (%ld)", target);
	if (target < 0)
		return;
	filler = fill_until_block(pagemap, target, bsize, &nfiller);
	a = map_pages(OFF_PAGES);
	syscall(SYS_mbind, a, OFF_PAGES * PAGE, 2 /* MPOL_BIND */, &node1, 64, 0);
	off_fill(a, 0, OFF_PAGES);
	madvise(a, OFF_PAGES * PAGE, MADV_MERGEABLE);
	ksm_set_knob("run", 1);
	/* Nearly all, as after each round: the rounds compare with what was merged before. */
	w = wait_merged(OFF_PAGES * 15 / 16, 60);
	check(w, "offline: the pages merged (%ld)", merging_pages());
	for (size_t i = 0; i < OFF_PAGES; i++) {
		pages[i] = a + i * PAGE;
		nodes[i] = 1;
	}
	while (now() < end && rounds < 4) {
		size_t s0 = (rounds % 4) * slice, s1 = s0 + slice;

		/* Back to node 1, merged pages too (MPOL_MF_MOVE_ALL). */
		syscall(SYS_move_pages, 0, OFF_PAGES, pages, nodes, status, MPOL_MF_MOVE_ALL);
		/* The movable blocks that hold KSM pages of the area (frames of both halves). */
		read_frames(pagemap, a, OFF_PAGES, frames);
		nblocks = 0;
		for (size_t i = 0; i < half; i++) {
			long b = frames[i] ? (long)(frames[i] * PAGE / bsize) : -1;
			int seen = 0;

			if (b < 0 || frames[i] != frames[i + half])
				continue;
			for (long k = 0; k < nblocks; k++)
				seen |= blocks[k] == b;
			if (!seen && block_attr_is(b, "state", "online") &&
			    block_attr_is(b, "valid_zones", "Movable"))
				blocks[nblocks++] = b;
		}
		round_offlined = 0;
		/* A slice of pairs freed: stale stable nodes whose frames lie in those blocks. */
		munmap(a + s0 * PAGE, slice * PAGE);
		munmap(a + (half + s0) * PAGE, slice * PAGE);
		before = off_merged_pairs(pagemap, a, frames);
		for (long k = 0; k < nblocks; k++) {
			int err = EBUSY;

			for (int t = 0; t < 5 && err == EBUSY; t++)
				err = set_block_bounded_ksm(blocks[k], "offline", offline_secs);
			timed_out |= err == ETIMEDOUT;
			if (!err) {
				offlined++;
				round_offlined++;
			} else {
				/* EINVAL: a block with holes (the firmware's tables at the top
				 * of node 1), which can never go offline.
				 */
				printf("# round %d: block %ld: offline: %s\n", rounds, blocks[k],
				       strerror(err));
				blocks[k] = -1;
			}
		}
		/*
		 * The rest still merged, elsewhere, and right. Nothing here unmerges a page, and
		 * migration keeps a KSM page merged: no fewer pairs share a frame than before, and
		 * some did (none would pass vacuously). (A fixed share of ksm_merging_pages failed
		 * when the area had merged just past it, rksm at 64K once; and that count lags the
		 * unmapped slice.)
		 */
		after = off_merged_pairs(pagemap, a, frames);
		moved += before > 0 && after >= before;
		printf("# round %d: %ld pairs merged before offlining, %ld after\n", rounds, before,
		       after);
		if (off_wrong(a, 0, s0) >= 0 || off_wrong(a, s1, half + s0) >= 0 ||
		    off_wrong(a, half + s1, OFF_PAGES) >= 0) {
			wrong++;
			printf("# round %d: a page reads wrong after offlining\n", rounds);
		}
		for (long k = 0; k < nblocks; k++)
			if (blocks[k] >= 0)
				onlined += !set_block(blocks[k], "online_movable") ||
					   !set_block(blocks[k], "online");
		/* The slice again, on the frames that came back. */
		for (size_t from = s0; from < OFF_PAGES; from += half) {
			if (mmap(a + from * PAGE, slice * PAGE, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
				perror("mmap");
				exit(2);
			}
			syscall(SYS_mbind, a + from * PAGE, slice * PAGE, 2, &node1, 64, 0);
			off_fill(a, from, from + slice);
			madvise(a + from * PAGE, slice * PAGE, MADV_MERGEABLE);
		}
		/* The slice too: every pair, but for a few a pass may not have reached yet. */
		if (wait_merged(OFF_PAGES * 15 / 16, 60)) {
			remerged++;
		} else {
			/* What the scanner did, and how much later the slice merges, if it does. */
			double t = now();
			long scans = ksm_knob("full_scans");

			printf("# round %d: %ld merging pages after 60 s: pages_shared %ld, pages_sharing %ld, pages_unshared %ld, pages_volatile %ld, pages_skipped %ld\n",
			       rounds, merging_pages(), ksm_knob("pages_shared"),
			       ksm_knob("pages_sharing"), ksm_knob("pages_unshared"), ksm_knob("pages_volatile"),
			       ksm_knob("pages_skipped"));
			w = wait_merged(OFF_PAGES * 15 / 16, 120);
			printf("# round %d: %s %.1f s later, %ld full scans later\n", rounds,
			       w ? "merged" : "still not merged", now() - t, ksm_knob("full_scans") - scans);
		}
		if (off_wrong(a, 0, OFF_PAGES) >= 0) {
			wrong++;
			printf("# round %d: a page reads wrong after merging again\n", rounds);
		}
		printf("# round %d: %ld blocks offlined of %ld, %ld merging pages\n", rounds,
		       round_offlined, nblocks, merging_pages());
		offline_rounds += round_offlined > 0;
		rounds++;
		if (timed_out)
			break;
	}
	printf("# offline: %ld blocks offlined, %ld onlined again, %d rounds\n", offlined, onlined,
	       rounds);
	check(!timed_out, "offline: every offlining finished within %d s", offline_secs);
	check(offline_rounds == rounds,
	      "offline: a block holding KSM pages went offline in every round (%d of %d, %ld blocks)",
	      offline_rounds, rounds, offlined);
	check(onlined == offlined, "offline: and online again (%ld)", onlined);
	check(moved == rounds, "offline: the pages stayed merged (%d of %d rounds)", moved, rounds);
	check(remerged == rounds, "offline: the freed slice merged again (%d of %d rounds)",
	      remerged, rounds);
	check(!wrong, "offline: every byte right (%d of %d rounds wrong)", wrong, rounds);
	ksm_set_knob("run", 2);
	left = ksm_knob("pages_shared") + ksm_knob("pages_sharing") + ksm_knob("stable_node_chains") +
	       ksm_knob("stable_node_dups");
	check(left == 0, "offline: no KSM page or node left after run=2 (%ld)", left);
	check(off_wrong(a, 0, OFF_PAGES) < 0, "offline: every byte right at the end");
	munmap(a, OFF_PAGES * PAGE);
	if (filler)
		munmap(filler, nfiller * PAGE);
	close(pagemap);
}
/*
 * advisor: the scan-time advisor (C's scan_time_advisor()) scales pages_to_scan by the CPU time
 * a pass took. Its ksm_advisor trace event reports the pass's whole seconds and "cpu percent"
 * (both rounded down), whose product is the pass's CPU time in units of 10 ms, short by less
 * than one unit per second reported. Over sixteen passes of unique pages, with two scanner
 * threads where the kernel has them, that sum must be nearer what every scanner thread (ksmd
 * and ksmd/N) spent by /proc/<pid>/stat than what ksmd alone spent. It may be below the threads'
 * time by `tol`, the rounding (the passes' seconds reported, in units) and `edge`, 100 ms either
 * way (clock ticks, the passes' edges), and above it by 10% and `tol`. The helpers must have
 * spent more than `tol` and `edge`, so that a sum without their time (spent - helped, give or
 * take the same) cannot pass. They share a batch only of SHARED_BATCH pages or more, so ksmd
 * sleeps 20 ms after each pages_to_scan: a pass of a second then takes about 50 wake-ups, of
 * hundreds of pages each. (Without sleeps a pass took a fraction of a second, reported as one,
 * and the advisor shrank pages_to_scan, pass by pass, below what the helpers share: see the
 * commit that brought the sleep.) The area is 128 MiB whatever the page size: a pass's CPU
 * time goes with the bytes it checksums.
 */
#define ADV_PAGES ((128UL << 20) / PAGE)
#define ADV_SLEEP_MS 20
#define TRACING "/sys/kernel/tracing/"

/* CPU time of every scanner thread in clock ticks; `helpers` gets that of ksmd/N alone. */
static long scanner_ticks(long *helpers)
{
	char path[300], buf[512];
	long total = 0, ut, st;
	struct dirent *d;
	DIR *dir = opendir("/proc");
	int fd, n;

	*helpers = 0;
	while (dir && (d = readdir(dir))) {
		snprintf(path, sizeof(path), "/proc/%s/stat", d->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = 0;
		/* pid (comm) state ppid ... utime(14) stime(15); comm "ksmd" or "ksmd/N" */
		char *c = strchr(buf, '('), *e = strrchr(buf, ')');

		if (!c || !e || strncmp(c + 1, "ksmd", 4) || (e != c + 5 && c[5] != '/'))
			continue;
		if (sscanf(e + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &ut,
			   &st) != 2)
			continue;
		total += ut + st;
		if (c[5] == '/')
			*helpers += ut + st;
	}
	if (dir)
		closedir(dir);
	return total;
}

/*
 * The ksm_advisor events in the trace buffer: how many, their sum of seconds x percent, and
 * their sum of seconds.
 */
static int advisor_events(long *sum, long *seconds)
{
	static char buf[1 << 20];
	int fd = open(TRACING "trace", O_RDONLY), n = 0, len = 0, r;
	long secs, pages;
	unsigned int pct;

	*sum = *seconds = 0;
	if (fd < 0)
		return -1;
	while (len < (int)sizeof(buf) - 1 && (r = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += r;
	close(fd);
	buf[len] = 0;
	for (char *p = buf; (p = strstr(p, "ksm scan time ")); p++) {
		if (sscanf(p, "ksm scan time %ld pages_to_scan %ld cpu percent %u", &secs, &pages,
			   &pct) != 3)
			continue;
		n++;
		*sum += secs * pct;
		*seconds += secs;
	}
	return n;
}

static void scenario_advisor(double budget)
{
	long threads = ksm_knob("scan_threads"), target = ksm_knob("advisor_target_scan_time");
	long sum0, sum1, s0, s1, t0, t1, h0, h1, mode_ok;
	double end = now() + budget;
	uint64_t x = 88172645463325252ULL;
	int n0, n1;
	char *a;

	if (access(TRACING "trace", R_OK))
		mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL);
	ksm_set_knob("run", 2);
	if (threads > 0)
		ksm_set_knob("scan_threads", 2);
	ksm_set_knob("sleep_millisecs", ADV_SLEEP_MS);
	write_str_trunc(KSM "advisor_mode", "scan-time");
	ksm_set_knob("advisor_target_scan_time", 1);
	mode_ok = access(KSM "advisor_mode", W_OK) == 0;
	a = map_pages(ADV_PAGES);
	for (size_t i = 0; i < ADV_PAGES * PAGE / 8; i++) {	/* pages that match nothing */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		((uint64_t *)a)[i] = x;
	}
	madvise(a, ADV_PAGES * PAGE, MADV_MERGEABLE);
	write_str_trunc(TRACING "trace", "");
	write_str_trunc(TRACING "events/ksm/ksm_advisor/enable", "1");
	ksm_set_knob("run", 1);
	/* From the end of one pass to the end of the sixteenth after it. */
	n0 = 0;
	while (now() < end && (n0 = advisor_events(&sum0, &s0)) < 1)
		usleep(20000);
	t0 = scanner_ticks(&h0);
	n1 = n0;
	while (now() < end && (n1 = advisor_events(&sum1, &s1)) < n0 + 16)
		usleep(20000);
	t1 = scanner_ticks(&h1);
	n1 = advisor_events(&sum1, &s1);
	write_str_trunc(TRACING "events/ksm/ksm_advisor/enable", "0");
	write_str_trunc(KSM "advisor_mode", "none");
	ksm_set_knob("advisor_target_scan_time", target);
	if (threads > 0)
		ksm_set_knob("scan_threads", threads);
	ksm_set_knob("pages_to_scan", 100);
	munmap(a, ADV_PAGES * PAGE);

	/* In units of 10 ms. */
	long reported = sum1 - sum0, spent = (t1 - t0) * 100 / sysconf(_SC_CLK_TCK);
	long helped = (h1 - h0) * 100 / sysconf(_SC_CLK_TCK), edge = 10, tol = (s1 - s0) + edge;

	printf("# advisor: %d passes (%ld s reported)\n", n1 - n0, s1 - s0);
	printf("# advisor: CPU ms reported %ld, spent %ld, by the helpers %ld; tolerance %ld ms\n",
	       reported * 10, spent * 10, helped * 10, tol * 10);
	check(mode_ok && n0 >= 1 && n1 >= n0 + 16, "advisor: passes with the advisor on (%d)",
	      n1 - n0);
	if (threads <= 0)
		printf("# advisor: one scanner thread (no scan_threads): no helpers to count\n");
	else
		check(helped > tol + edge, "advisor: helpers' CPU ms %ld, more than %ld", helped * 10,
		      (tol + edge) * 10);
	check(reported >= spent - tol && reported <= spent + spent / 10 + tol,
	      "advisor: CPU ms reported %ld: every thread's %ld, not ksmd's %ld", reported * 10,
	      spent * 10, (spent - helped) * 10);
}

/*
 * zeroes: with use_zero_pages, ZW processes map areas of real all-zero pages (faulted in by a
 * write), make them mergeable, and unmap and map them again at the same address without pause,
 * while ksmd (two scanner threads where the kernel has them, batches as large as it takes)
 * merges them with the zero page. A scanner batch holds references to the pages it gathered
 * across drops of their mmap locks: a page merged after its area was unmapped and mapped again
 * points at an anon_vma that may be freed. Every byte must read zero, pages must have been
 * merged with the zero page, and none may be counted (ksm_zero_pages) once every process exited.
 */
#define ZW 4
#define ZPAGES 1024

static uint64_t zero(size_t i, uint64_t seed)
{
	(void)i;
	(void)seed;
	return 0;
}

/* One process's loop; exits 0, or 1 on a wrong byte, 3 if it could not map its area. */
static void zero_worker(int w, double end)
{
	char *base = (char *)(0x300000000000UL + ((uintptr_t)w << 32));
	uint64_t x = 0x9e3779b97f4a7c15ULL * (w + 1);

	while (now() < end) {
		char *a = mmap(base, ZPAGES * PAGE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

		if (a == MAP_FAILED)
			_exit(3);
		madvise(a, ZPAGES * PAGE, MADV_MERGEABLE);
		for (size_t i = 0; i < ZPAGES; i++)
			a[i * PAGE + (i * 64) % PAGE] = 0;
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		usleep(x % 40000);
		/* A write to a page that may be the zero page now, undone. */
		a[(x >> 20) % ZPAGES * PAGE] = 1;
		a[(x >> 20) % ZPAGES * PAGE] = 0;
		if (first_wrong(a, ZPAGES, zero, 0) >= 0)
			_exit(1);
		/* Now and then a child shares the pages, checks them, writes one and exits. */
		if ((x & 6) == 0) {
			pid_t c = fork();
			int cs;

			if (c == 0) {
				char *p = a + (x >> 30) % ZPAGES * PAGE;

				if (first_wrong(a, ZPAGES, zero, 0) >= 0)
					_exit(1);
				*(volatile char *)p = 2;
				_exit(*(volatile char *)p != 2);
			}
			if (c < 0 || waitpid(c, &cs, 0) != c || !WIFEXITED(cs) || WEXITSTATUS(cs))
				_exit(1);
		}
		/* Half the time the whole area goes, else its first half. */
		munmap(a, (x & 1 ? ZPAGES : ZPAGES / 2) * PAGE);
	}
	_exit(0);
}

static void scenario_zeroes(double budget)
{
	long threads = ksm_knob("scan_threads"), zp = ksm_knob("use_zero_pages"), peak = 0, left = -1;
	double end = now() + budget, t;
	pid_t pids[ZW];
	int bad = 0, st;

	ksm_set_knob("run", 2);
	if (threads > 0)
		ksm_set_knob("scan_threads", 2);
	ksm_set_knob("use_zero_pages", 1);
	ksm_set_knob("sleep_millisecs", 0);
	ksm_set_knob("pages_to_scan", 4096);
	ksm_set_knob("run", 1);
	for (int w = 0; w < ZW; w++) {
		pids[w] = fork();
		if (pids[w] == 0)
			zero_worker(w, end);
	}
	while (now() < end) {
		long z = ksm_knob("ksm_zero_pages");

		peak = z > peak ? z : peak;
		usleep(20000);
	}
	for (int w = 0; w < ZW; w++) {
		if (pids[w] < 0 || waitpid(pids[w], &st, 0) != pids[w] || !WIFEXITED(st) ||
		    WEXITSTATUS(st)) {
			printf("# zeroes: worker %d: status %#x\n", w, pids[w] < 0 ? -1 : st);
			bad++;
		}
	}
	ksm_set_knob("run", 2);
	/* A scanner may hold an exited process's address space for a moment. */
	for (t = now() + 10; now() < t && (left = ksm_knob("ksm_zero_pages")) != 0;)
		usleep(50000);
	ksm_set_knob("use_zero_pages", zp);
	if (threads > 0)
		ksm_set_knob("scan_threads", threads);
	ksm_set_knob("pages_to_scan", 100);
	check(bad == 0, "zeroes: %d workers, every byte read zero (%d failed)", ZW, bad);
	check(peak > 0, "zeroes: pages merged with the zero page (peak ksm_zero_pages %ld)", peak);
	check(left == 0, "zeroes: no zero page counted after every process exited (%ld)", left);
}

/*
 * noinit: the kernel booted with rksm's init left out (initcall_blacklist=__rksm_init), as if
 * init had failed: KSM is off, and asking for it fails cleanly (ENOMEM, which madvise() gives
 * as EAGAIN) instead of a BUG.
 * rksm once reached its global state through a function that panicked when init had not run.
 */
static void scenario_noinit(void)
{
	char *a = map_pages(64);
	long stat;
	pid_t pid;
	int r, st;

	check(access(KSM "run", F_OK) != 0, "noinit: /sys/kernel/mm/ksm has no files (init left out)");
	fill(a, 64, same, 0x1234);
	errno = 0;
	r = madvise(a, 64 * PAGE, MADV_MERGEABLE);
	/* madvise() turns ENOMEM into EAGAIN (mm/madvise.c), as for C KSM's own ENOMEM. */
	check(r == -1 && errno == EAGAIN, "noinit: MADV_MERGEABLE fails with EAGAIN (%d, %s)", r,
	      strerror(errno));
	errno = 0;
	r = prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0);
	check(r == -1 && errno == ENOMEM, "noinit: PR_SET_MEMORY_MERGE fails with ENOMEM (%d, %s)",
	      r, strerror(errno));
	r = prctl(PR_GET_MEMORY_MERGE, 0, 0, 0, 0);
	check(r == 0, "noinit: PR_GET_MEMORY_MERGE reads 0 (%d)", r);
	r = madvise(a, 64 * PAGE, MADV_UNMERGEABLE);
	check(r == 0, "noinit: MADV_UNMERGEABLE succeeds, as on any area that is not mergeable");
	stat = read_long("/proc/self/ksm_merging_pages");
	check(stat == 0, "noinit: /proc/self/ksm_merging_pages reads 0 (%ld)", stat);
	pid = fork();
	if (pid == 0)
		_exit(first_wrong(a, 64, same, 0x1234) >= 0);
	check(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st),
	      "noinit: a forked child reads its memory right and exits");
	check(first_wrong(a, 64, same, 0x1234) < 0, "noinit: every byte right");
	munmap(a, 64 * PAGE);
}

int main(int argc, char **argv)
{
	double secs = argc > 2 ? atof(argv[2]) : 60;

	if (argc < 2) {
		fprintf(stderr, "usage: %s register|migrate|release|bystander|offline|advisor|zeroes|noinit [SECONDS]\n", argv[0]);
		return 2;
	}
	PAGE = sysconf(_SC_PAGESIZE);
	setvbuf(stdout, NULL, _IOLBF, 0);
	save_knobs();
	if (!strcmp(argv[1], "register"))
		scenario_register(secs);
	else if (!strcmp(argv[1], "migrate"))
		scenario_migrate(secs);
	else if (!strcmp(argv[1], "release"))
		scenario_release(secs);
	else if (!strcmp(argv[1], "bystander"))
		scenario_bystander(secs);
	else if (!strcmp(argv[1], "offline"))
		scenario_offline(secs);
	else if (!strcmp(argv[1], "advisor"))
		scenario_advisor(secs);
	else if (!strcmp(argv[1], "zeroes"))
		scenario_zeroes(secs);
	else if (!strcmp(argv[1], "noinit"))
		scenario_noinit();
	else {
		fprintf(stderr, "unknown scenario %s\n", argv[1]);
		return 2;
	}
	restore_knobs();
	printf("1..%d\n", tests);
	return failures != 0;
}
