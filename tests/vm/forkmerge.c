// SPDX-License-Identifier: GPL-2.0
/*
 * A page shared since a fork, with a child that merges and a parent that does not.
 *
 * The parent fills an area with equal pages and forks; the child turns PR_SET_MEMORY_MERGE on
 * (as a process does that asks for KSM after it was forked), and exits once pages of its own
 * have merged and KSM has made three more full scans. Every page of the shared area was then
 * compared while the parent, which is not scanned, still mapped it.
 *
 * C KSM turns one of those pages into a KSM page in place. Its reverse map knows only the
 * child's rmap_item, which goes with the child: the parent's entry is never found again, and the
 * page can be neither migrated (move_pages() reports it not moved) nor offlined (offline_pages()
 * retries it until the writer is killed). rksm does not make a page a KSM page in place while
 * an address space that is not scanned maps it (Documentation/mm/rksm.rst): nothing is lost,
 * the parent keeps its page whatever the child maps.
 *
 * Then the same with the parent's area mergeable too: the pages merge, and move. Then the first
 * case again with the parent's area moved by mremap() before the child merges: the reverse map
 * finds the page there by its offset, not by the child's address.
 *
 * TAP output; needs two NUMA nodes and root (MPOL_MF_MOVE_ALL).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <numaif.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "util.h"

#ifndef PR_SET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67
#endif
#define KSM "/sys/kernel/mm/ksm/"
#define SHARED 64 /* pages the parent and the child share */
#define OWN 16 /* pages the child writes after the fork */

static long page_size;
static int tap_n, failed;

static void tap(int ok, const char *fmt, const char *detail)
{
	printf("%s %d - %s%s%s\n", ok ? "ok" : "not ok", ++tap_n, fmt, detail[0] ? ": " : "",
	       detail);
	failed += !ok;
}

/*
 * The KSM pages of the area that holds p, in kB, from /proc/self/smaps ("KSM:"), or -1. Not
 * /proc/kpageflags: 6.12's stable_page_flags() tests the KSM mapping bits with &, which every
 * anonymous page passes, and reports KPF_KSM for all of them.
 */
static long ksm_kb(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	unsigned long from, to;
	int here = 0;
	char line[256];
	long kb = -1;

	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &from, &to) == 2 && strchr(line, '-') < strchr(line, ' '))
			here = from <= (uintptr_t)p && (uintptr_t)p < to;
		else if (here && !strncmp(line, "KSM:", 4))
			kb = strtol(line + 4, NULL, 10);
	}
	if (f)
		fclose(f);
	return kb;
}

/*
 * The child: once go (a pipe) is closed, asks for KSM for all its areas, writes OWN equal pages
 * of its own, and exits 0 once they merged and KSM made three full scans more; 1 if they did
 * not merge in 120 s.
 */
static int child(int go)
{
	char *own = mmap(NULL, OWN * page_size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	long scans;
	char c;

	if (read(go, &c, 1) < 0 || own == MAP_FAILED || prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0))
		return 1;
	memset(own, 'c', OWN * page_size);
	for (int i = 0; i < 1200 && read_long("/proc/self/ksm_merging_pages") < OWN; i++)
		usleep(100000);
	if (read_long("/proc/self/ksm_merging_pages") < OWN)
		return 1;
	scans = read_long(KSM "full_scans");
	for (int i = 0; i < 1200 && read_long(KSM "full_scans") < scans + 3; i++)
		usleep(100000);
	return read_long(KSM "full_scans") < scans + 3;
}

/*
 * Moves each of the SHARED pages at a to the node it is not on, one call each (pages merged
 * into one frame: a call with them all would find that frame isolated already, EBUSY); how many
 * did not move, or -1.
 */
static int move_all(char *a, char *detail, size_t len)
{
	int left = 0;

	for (int i = 0; i < SHARED; i++) {
		void *page = a + i * page_size;
		int where, to, status = -1;
		long r;

		if (syscall(SYS_move_pages, 0, 1, &page, NULL, &where, 0) || where < 0)
			return -1;
		to = !where;
		r = syscall(SYS_move_pages, 0, 1, &page, &to, &status, MPOL_MF_MOVE_ALL);
		if (r < 0)
			return -1;
		if ((r || status != to) && !left++)
			snprintf(detail, len, "page %d stayed on node %d (%ld not moved, status %d)",
				 i, where, r, status);
	}
	return left;
}

/* How the parent holds the area it shares with the child. */
enum parent { NOT_MERGING, MERGING, MOVED };

static const char *const parent_names[] = {
	[NOT_MERGING] = "parent does not merge",
	[MERGING] = "parent merges",
	[MOVED] = "parent does not merge, moved its area",
};

/*
 * One round. MOVED: the parent moves its area with mremap() after the fork, before the child
 * merges, so that the page the child maps at one address, the parent maps at another.
 */
static void round_of(enum parent how)
{
	char *a = mmap(NULL, SHARED * page_size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char detail[160] = "", what[128], *hole = NULL;
	int status, wrong = 0, left, go[2];
	pid_t pid;

	if (a == MAP_FAILED || pipe(go)) {
		tap(0, "mmap, pipe", strerror(errno));
		return;
	}
	memset(a, 'p', SHARED * page_size);
	if (how == MERGING && madvise(a, SHARED * page_size, MADV_MERGEABLE))
		tap(0, "MADV_MERGEABLE", strerror(errno));
	pid = fork();
	if (!pid) {
		close(go[1]);
		_exit(child(go[0]));
	}
	close(go[0]);
	if (how == MOVED) {
		/* Twice the size: the area lands at an address the child's is not at. */
		char *to = mmap(NULL, 2 * SHARED * page_size, PROT_NONE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		hole = to == MAP_FAILED ? NULL : to;
		a = to == MAP_FAILED ? MAP_FAILED :
		    mremap(a, SHARED * page_size, SHARED * page_size,
			   MREMAP_MAYMOVE | MREMAP_FIXED, to + SHARED * page_size);
		if (a == MAP_FAILED) {
			tap(0, "mremap", strerror(errno));
			close(go[1]);
			waitpid(pid, &status, 0);
			return;
		}
	}
	close(go[1]);
	status = pid < 0 ? -1 : 0;
	if (pid > 0 && waitpid(pid, &status, 0) != pid)
		status = -1;
	snprintf(what, sizeof(what),
		 "the child's own pages merged and KSM scanned 3 times more (%s)",
		 parent_names[how]);
	snprintf(detail, sizeof(detail), "status %#x", status);
	tap(status == 0, what, status ? detail : "");
	detail[0] = 0;
	if (how == MERGING) {
		/* The parent's pages merge once the parent is scanned too. */
		for (int i = 0; i < 600 && read_long("/proc/self/ksm_merging_pages") < SHARED; i++)
			usleep(100000);
		snprintf(detail, sizeof(detail), "%ld of %d",
			 read_long("/proc/self/ksm_merging_pages"), SHARED);
		tap(read_long("/proc/self/ksm_merging_pages") == SHARED,
		    "the parent's pages merged (parent merges)", detail);
	} else {
		long kb = ksm_kb(a);

		snprintf(detail, sizeof(detail), "smaps: KSM: %ld kB", kb);
		snprintf(what, sizeof(what),
			 "no page of an address space that is not scanned became a KSM page (%s)",
			 parent_names[how]);
		tap(kb == 0, what, detail);
	}
	detail[0] = 0;
	/* ksmd stopped, merged pages kept: its references would fail a migration now and then. */
	write_str(KSM "run", "0");
	left = move_all(a, detail, sizeof(detail));
	if (left < 0)
		snprintf(detail, sizeof(detail), "move_pages: %s", strerror(errno));
	snprintf(what, sizeof(what), "move_pages() moved every page the parent maps (%s)",
		 parent_names[how]);
	tap(left == 0, what, detail);
	for (long i = 0; i < SHARED * page_size; i++)
		wrong += a[i] != 'p';
	snprintf(detail, sizeof(detail), "%d bytes wrong", wrong);
	tap(!wrong, "the parent's bytes read back", wrong ? detail : "");
	munmap(a, SHARED * page_size);
	if (hole)
		munmap(hole, SHARED * page_size);
	write_str(KSM "run", "2");
	write_str(KSM "run", "1");
}

int main(void)
{
	page_size = getpagesize();
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("1..12\n");
	if (write_str(KSM "run", "1") || write_str(KSM "sleep_millisecs", "0") ||
	    write_str(KSM "pages_to_scan", "1000")) {
		printf("Bail out! cannot set KSM's knobs\n");
		return 1;
	}
	round_of(NOT_MERGING);
	round_of(MERGING);
	round_of(MOVED);
	write_str(KSM "sleep_millisecs", "20");
	write_str(KSM "pages_to_scan", "100");
	return failed ? 1 : 0;
}
