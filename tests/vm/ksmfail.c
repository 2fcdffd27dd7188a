// SPDX-License-Identifier: GPL-2.0
/*
 * ksmfail: KSM's entry points with their allocations failed one at a time (fault injection's
 * fail-nth, Documentation/fault-injection/fault-injection.rst), on the debug kernels
 * (kernel/config/debug.config: FAILSLAB, FAIL_PAGE_ALLOC).
 *
 * For each entry point, a sweep: in a fresh child process set up as the call needs (an area
 * of pairs of equal pages, merged or not), the Nth fault point of the call is made to fail,
 * for N = 1, 2, ... until the call runs with no fault point left to fail. After each call:
 * its result must be success or C's errors for lack of memory (ENOMEM, and EAGAIN, which
 * madvise() returns for it), every byte of the area must read as written, a retry without
 * injection must succeed, and what the call promises must hold (an unmerged area has no page
 * merged, a merged area merges). The last call, with nothing injected, must succeed.
 *
 * The sweeps "swapin" (merged pages swapped out to zram by a memory cgroup's reclaim, faulted
 * back by MADV_POPULATE_READ) and "offline" (a ZONE_MOVABLE memory block holding merged pages
 * taken offline: boot with kernelcore= below the memory size) fail the Nth fault point of the
 * swap-in and of the offline.
 *
 * The sweep "ksmd" fails the Nth allocation of the scanner threads instead (their fail-nth,
 * written from here) while a child's area merges: merging must still complete, every byte
 * intact.
 *
 * At the end, run=2 must leave every KSM counter at zero. Prints one TAP line per sweep, each
 * call's N and result as comments ("# madvise 3 EAGAIN injected"), and exits non-zero if any
 * sweep failed.
 *
 * Usage: ksmfail [-m] [-n MAX] [-s STRIDE] [SWEEP...]   (default: every sweep; -m checks
 * merging after every call, not only every eighth and the last; -n: N up to MAX at most,
 * default 400; -s: a short sweep, N = 1 to 16 then every STRIDE-th, default every N)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <numaif.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#ifndef PR_SET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67
#define PR_GET_MEMORY_MERGE 68
#endif

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#define KSM "/sys/kernel/mm/ksm/"
#define DBG "/sys/kernel/debug/"
/* Pairs of equal pages in an area. */
#define PAIRS 16
#define PAGES (2 * PAIRS)

static size_t page_size;
static int every_merge;
static int max_calls = 400;
/* Short sweeps: N = 1 to 16, then every stride-th (0: every N). */
static int stride;
static const char *self_exe;

/* What a child reports of its call, in memory shared with the parent. */
struct report {
	int injected; /* the Nth fault point was reached (fail-nth read back 0) */
	int ret;      /* the call's return value (0 or -1, or a pid) */
	int err;      /* its errno */
	int bad;      /* a check after the call failed: what is in why */
	char why[200];
};

static struct report *rep;

/* exec's result when its process was killed past the point of no return (no errno). */
#define KILLED 100001

static void bad(const char *fmt, ...)
{
	va_list ap;

	if (rep->bad)
		return;
	rep->bad = 1;
	va_start(ap, fmt);
	vsnprintf(rep->why, sizeof(rep->why), fmt, ap);
	va_end(ap);
}

/* The byte page i of an area is filled with: pages 2k and 2k + 1 are equal. */
static unsigned char fill_of(int i)
{
	return 0x10 + i / 2;
}

static char *new_area(void)
{
	char *a = mmap(NULL, PAGES * page_size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (a == MAP_FAILED) {
		bad("mmap: %s", strerror(errno));
		return NULL;
	}
	for (int i = 0; i < PAGES; i++)
		memset(a + i * page_size, fill_of(i), page_size);
	return a;
}

static void verify(const char *a)
{
	for (int i = 0; i < PAGES; i++)
		for (size_t j = 0; j < page_size; j++)
			if ((unsigned char)a[i * page_size + j] != fill_of(i)) {
				bad("page %d byte %zu reads %#x, not %#x", i, j,
				    (unsigned char)a[i * page_size + j], fill_of(i));
				return;
			}
}

static long merging(void)
{
	return read_long("/proc/self/ksm_merging_pages");
}

/* The pagemap entry of the page at p: 0 if it cannot be read. */
static unsigned long long pagemap_of(const void *p)
{
	/* Opened once by each process (a child must not read its parent's). */
	static pid_t pid;
	static int fd = -1;
	unsigned long long e = 0;

	if (pid != getpid()) {
		if (fd >= 0)
			close(fd);
		fd = open("/proc/self/pagemap", O_RDONLY);
		pid = getpid();
	}
	if (fd < 0 || pread(fd, &e, sizeof(e), (unsigned long)p / page_size * sizeof(e)) != sizeof(e))
		e = 0;
	return e;
}

/*
 * How many pages of the area are not mapped by this process alone (/proc/self/pagemap's
 * "exclusively mapped" bit, 56, clear; or not present): after an unmerge, none. (The count in
 * ksm_merging_pages is of rmap_items, which leave their stable nodes only when the scanner
 * comes by, on C as on rksm.)
 */
static int not_exclusive(const char *a)
{
	int n = 0;

	for (int i = 0; i < PAGES; i++) {
		unsigned long long e = pagemap_of(a + i * page_size);

		n += !(e >> 63 & 1) || !(e >> 56 & 1);
	}
	return n;
}

/*
 * Says, for a failure's report, where the area's pages are: each distinct frame with how many
 * of the pages map it and its swap-cache flag (/proc/kpageflags bit 14), the pages swapped out,
 * and KSM's counters.
 */
static void describe_area(const char *a)
{
	unsigned long long pfn[PAGES], flags;
	int kpf = open("/proc/kpageflags", O_RDONLY), swapped = 0, absent = 0;

	for (int i = 0; i < PAGES; i++) {
		unsigned long long e = pagemap_of(a + i * page_size);

		pfn[i] = e >> 63 & 1 ? e & ((1ULL << 55) - 1) : 0;
		swapped += !(e >> 63 & 1) && (e >> 62 & 1);
		absent += !(e >> 63 & 1) && !(e >> 62 & 1);
	}
	for (int i = 0; i < PAGES; i++) {
		int n = 0, seen = 0;

		if (!pfn[i])
			continue;
		for (int j = 0; j < PAGES; j++) {
			n += pfn[j] == pfn[i];
			seen |= j < i && pfn[j] == pfn[i];
		}
		if (seen)
			continue;
		flags = 0;
		if (kpf >= 0 && pread(kpf, &flags, sizeof(flags), pfn[i] * sizeof(flags)) != sizeof(flags))
			flags = 0;
		printf("#   frame %#llx: %d of the pages, first page %d%s\n", pfn[i], n, i,
		       flags >> 14 & 1 ? ", in the swap cache" : "");
	}
	if (kpf >= 0)
		close(kpf);
	printf("#   %d pages swapped out, %d not there; pages_shared %ld, pages_sharing %ld, pages_unshared %ld, pages_volatile %ld, full_scans %ld\n",
	       swapped, absent,
	       read_long(KSM "pages_shared"), read_long(KSM "pages_sharing"),
	       read_long(KSM "pages_unshared"), read_long(KSM "pages_volatile"),
	       read_long(KSM "full_scans"));
}

/* Waits until at least want of this process's pages are merged: 0, or -1 after 60 s. */
static int wait_merged(long want)
{
	for (int i = 0; i < 6000; i++) {
		if (merging() >= want)
			return 0;
		usleep(10000);
	}
	return -1;
}

/* A new area, made mergeable and merged whole; NULL (the report says why) if it did not merge. */
static char *merged_area(void)
{
	char *a = new_area();

	if (a && (madvise(a, PAGES * page_size, MADV_MERGEABLE) || wait_merged(PAGES))) {
		bad("the area did not merge first (%ld pages)", merging());
		return NULL;
	}
	return a;
}

/* Whether the call with this N checks that the area merges (all with -m). */
static int check_merge(int n)
{
	return every_merge || n % 8 == 0;
}

/* fail-nth of this thread: set to n (0: off). */
static int nth_fd = -1;

static void nth_open(void)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%ld/fail-nth", (long)syscall(SYS_gettid));
	nth_fd = open(path, O_RDWR);
	if (nth_fd < 0)
		bad("%s: %s", path, strerror(errno));
}

static void nth_set(int n)
{
	char buf[16];
	int len = snprintf(buf, sizeof(buf), "%d", n);

	if (pwrite(nth_fd, buf, len, 0) != len)
		bad("fail-nth: %s", strerror(errno));
}

/* Turns injection off, and records whether the Nth fault point was reached. */
static void nth_done(void)
{
	char buf[16] = "";

	if (pread(nth_fd, buf, sizeof(buf) - 1, 0) <= 0)
		bad("fail-nth read: %s", strerror(errno));
	rep->injected = atoi(buf) == 0;
	nth_set(0);
}

/* The call's result, kept before anything else can change errno. */
static void result(int ret)
{
	rep->ret = ret;
	rep->err = ret < 0 ? errno : 0;
}

/* A failed call must have failed for lack of memory. */
static void check_errno(void)
{
	if (rep->ret < 0 && rep->err != ENOMEM && rep->err != EAGAIN)
		bad("failed with %s, not ENOMEM or EAGAIN", strerror(rep->err));
}

/* ---- the calls ---- */

static void madvise_call(int n, int split)
{
	char *a = new_area();
	char *from;
	size_t len;
	int r;

	if (!a)
		return;
	/* split: the middle half of the area, so that the call splits its VMA. */
	from = split ? a + PAGES / 4 * page_size : a;
	len = (split ? PAGES / 2 : PAGES) * page_size;
	nth_open();
	nth_set(n);
	r = madvise(from, len, MADV_MERGEABLE);
	result(r);
	nth_done();
	check_errno();
	verify(a);
	if (r && madvise(from, len, MADV_MERGEABLE))
		bad("madvise(MADV_MERGEABLE) again: %s", strerror(errno));
	if (check_merge(n) && wait_merged(len / page_size))
		bad("%ld of %zu pages merged", merging(), len / page_size);
	verify(a);
}

static void call_madvise(int n)
{
	madvise_call(n, 0);
}

static void call_madvise_split(int n)
{
	madvise_call(n, 1);
}

static void call_unmerge(int n)
{
	char *a = merged_area();
	int r;

	if (!a)
		return;
	nth_open();
	nth_set(n);
	r = madvise(a, PAGES * page_size, MADV_UNMERGEABLE);
	result(r);
	nth_done();
	check_errno();
	verify(a);
	if (r && madvise(a, PAGES * page_size, MADV_UNMERGEABLE))
		bad("madvise(MADV_UNMERGEABLE) again: %s", strerror(errno));
	if (not_exclusive(a))
		bad("%d pages shared after MADV_UNMERGEABLE", not_exclusive(a));
	verify(a);
}

static void call_prctl_on(int n)
{
	char *a = new_area();
	int r;

	if (!a)
		return;
	nth_open();
	nth_set(n);
	r = prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0);
	result(r);
	nth_done();
	check_errno();
	verify(a);
	if (r && prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0))
		bad("PR_SET_MEMORY_MERGE 1 again: %s", strerror(errno));
	if (prctl(PR_GET_MEMORY_MERGE, 0, 0, 0, 0) != 1)
		bad("PR_GET_MEMORY_MERGE is not 1");
	if (check_merge(n) && wait_merged(PAGES))
		bad("%ld of %d pages merged", merging(), PAGES);
	verify(a);
}

static void call_prctl_off(int n)
{
	char *a;
	int r;

	if (prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0)) {
		bad("PR_SET_MEMORY_MERGE 1: %s", strerror(errno));
		return;
	}
	a = new_area();
	if (!a)
		return;
	if (wait_merged(PAGES)) {
		bad("the area did not merge first (%ld pages)", merging());
		return;
	}
	nth_open();
	nth_set(n);
	r = prctl(PR_SET_MEMORY_MERGE, 0, 0, 0, 0);
	result(r);
	nth_done();
	check_errno();
	verify(a);
	if (r && prctl(PR_SET_MEMORY_MERGE, 0, 0, 0, 0))
		bad("PR_SET_MEMORY_MERGE 0 again: %s", strerror(errno));
	if (prctl(PR_GET_MEMORY_MERGE, 0, 0, 0, 0) != 0)
		bad("PR_GET_MEMORY_MERGE is not 0");
	if (not_exclusive(a))
		bad("%d pages shared after PR_SET_MEMORY_MERGE 0", not_exclusive(a));
	verify(a);
}

static void call_fork(int n)
{
	char *a = merged_area();
	int r, status;

	if (!a)
		return;
	nth_open();
	nth_set(n);
	r = fork();
	if (r == 0) {
		/* The child's own fail-nth starts at 0. It reads the area, and writes it. */
		for (int i = 0; i < PAGES; i++)
			for (size_t j = 0; j < page_size; j += 512)
				if ((unsigned char)a[i * page_size + j] != fill_of(i))
					_exit(3);
		memset(a, 0x55, page_size);
		_exit(0);
	}
	result(r);
	nth_done();
	check_errno();
	if (r > 0) {
		if (waitpid(r, &status, 0) != r || !WIFEXITED(status) || WEXITSTATUS(status))
			bad("the forked child read a wrong byte or died (status %#x)", status);
	}
	verify(a);
	/* The parent's pages stay merged (the child's write copied its own page). */
	if (check_merge(n) && wait_merged(PAGES))
		bad("%ld of %d pages merged after the fork", merging(), PAGES);
}

/* The program exec'd by call_exec: merging must be on, and its own pages must merge. */
static int exec_child(void)
{
	char *a;

	if (prctl(PR_GET_MEMORY_MERGE, 0, 0, 0, 0) != 1)
		return 2;
	a = mmap(NULL, PAGES * page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (a == MAP_FAILED)
		return 3;
	for (int i = 0; i < PAGES; i++)
		memset(a + i * page_size, fill_of(i), page_size);
	if (wait_merged(PAGES))
		return 4;
	return 0;
}

static void call_exec(int n)
{
	int pipefd[2], status, r;
	pid_t pid;
	char c;

	/* The exec'ing process is a child of this one, so that its exit can be waited for. */
	if (prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0) || pipe2(pipefd, O_CLOEXEC)) {
		bad("setup: %s", strerror(errno));
		return;
	}
	pid = fork();
	if (pid == 0) {
		static const char arg[] = "--exec-child";
		char *argv[3];

		/* execv() takes char *const[]: it does not write to the strings. */
		argv[0] = (char *)self_exe;
		argv[1] = (char *)arg;
		argv[2] = NULL;

		close(pipefd[0]);
		nth_open();
		nth_set(n);
		execv(self_exe, argv);
		/* execve() failed: tell the parent how (the pipe is still open). */
		r = errno;
		nth_done();
		c = rep->injected ? 'i' : 'n';
		if (write(pipefd[1], &c, 1) != 1 || write(pipefd[1], &r, sizeof(r)) != sizeof(r))
			_exit(9);
		_exit(8);
	}
	close(pipefd[1]);
	if (pid < 0) {
		bad("fork: %s", strerror(errno));
		return;
	}
	if (read(pipefd[0], &c, 1) == 1) {
		/*
		 * execve() failed. Copying the arguments turns a failed allocation into E2BIG
		 * (fs/exec.c, copy_strings()), and loading the binary may into ENOEXEC (no
		 * handler took it), on both kernels.
		 */
		if (read(pipefd[0], &r, sizeof(r)) != sizeof(r))
			r = 0;
		rep->ret = -1;
		rep->err = r;
		rep->injected = c == 'i';
		if (r != E2BIG && r != ENOEXEC)
			check_errno();
		waitpid(pid, &status, 0);
		close(pipefd[0]);
		return;
	}
	close(pipefd[0]);
	rep->ret = 0;
	if (waitpid(pid, &status, 0) != pid) {
		bad("waitpid: %s", strerror(errno));
	} else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) {
		/* A failure past exec's point of no return kills the process (SIGSEGV). */
		rep->ret = -1;
		rep->err = KILLED;
		rep->injected = 1;
	} else if (!WIFEXITED(status)) {
		bad("the exec'd program died (status %#x)", status);
	} else if (WEXITSTATUS(status) == 5 || WEXITSTATUS(status) == 127) {
		/*
		 * The exec ran with no fault point failed (127: the Nth fell in the new program's
		 * own start-up, before it could look, which the C library ends with 127).
		 */
		rep->injected = 0;
	} else if (WEXITSTATUS(status) == 6) {
		rep->injected = 1;
	} else {
		bad("the exec'd program failed its check %d", WEXITSTATUS(status));
	}
}

/*
 * The call is exit: the child merges its area, then exits with its Nth fault point set. The
 * parent reads the zombie's fail-nth before reaping it.
 */
static void call_exit(int n)
{
	pid_t pid = fork();
	siginfo_t si;
	char path[64], buf[16] = "";
	int fd;

	if (pid == 0) {
		if (!merged_area())
			_exit(3);
		nth_open();
		nth_set(n);
		_exit(0);
	}
	if (pid < 0) {
		bad("fork: %s", strerror(errno));
		return;
	}
	if (waitid(P_PID, pid, &si, WEXITED | WNOWAIT)) {
		bad("waitid: %s", strerror(errno));
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/fail-nth", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0)
		bad("%s: %s", path, strerror(errno));
	else
		rep->injected = atoi(buf) == 0;
	if (fd >= 0)
		close(fd);
	waitpid(pid, NULL, 0);
	rep->ret = 0;
	if (si.si_code != CLD_EXITED || si.si_status != 0)
		bad("the child did not merge, or died (code %d status %d)", si.si_code,
		    si.si_status);
}

/* A status move_pages() never writes. */
#define NOT_WRITTEN (-100000)

/*
 * move_pages() of merged pages to the other NUMA node: a page may stay (its status an
 * error), never be corrupted, and the area stays merged or merges again.
 */
static void call_move_pages(int n)
{
	char *a = merged_area();
	void *pages[PAGES];
	int nodes[PAGES], status[PAGES];
	long r;

	if (!a)
		return;
	for (int i = 0; i < PAGES; i++)
		pages[i] = a + i * page_size;
	/* Each page to the node it is not on (where it is, move_pages() has nothing to do). */
	if (syscall(SYS_move_pages, 0, PAGES, pages, NULL, status, 0)) {
		bad("move_pages() to query: %s", strerror(errno));
		return;
	}
	for (int i = 0; i < PAGES; i++) {
		nodes[i] = status[i] == 1 ? 0 : 1;
		status[i] = NOT_WRITTEN;
	}
	nth_open();
	nth_set(n);
	r = syscall(SYS_move_pages, 0, PAGES, pages, nodes, status, MPOL_MF_MOVE_ALL);
	result(r < 0 ? -1 : 0);
	nth_done();
	check_errno();
	/* The statuses are all written only when move_pages() returns 0. */
	for (int i = 0; i < PAGES && r == 0; i++)
		if (status[i] == NOT_WRITTEN)
			bad("page %d: no status written (move_pages() returned %ld)", i, r);
		else if (status[i] < 0 && status[i] != -ENOMEM && status[i] != -EAGAIN &&
			 status[i] != -EBUSY)
			bad("page %d: status %s", i, strerror(-status[i]));
	verify(a);
	if (check_merge(n) && wait_merged(PAGES))
		bad("%ld of %d pages merged after move_pages()", merging(), PAGES);
	verify(a);
}

/* ---- swap-in and hot-remove ---- */

#define CGROUP "/sys/fs/cgroup/"


/* How many pages of the area are swapped out (pagemap bit 62). */
static int swapped_out(const char *a)
{
	int n = 0;

	for (int i = 0; i < PAGES; i++)
		n += pagemap_of(a + i * page_size) >> 62 & 1;
	return n;
}

/*
 * Swap to zram and a memory cgroup "ksmfail" whose reclaim swaps a child's pages out (set up
 * once, by the parent): 0, or -1 with the reason printed.
 */
static int setup_swap(void)
{
	char line[256];
	FILE *f = fopen("/proc/swaps", "r");
	int on = 0;

	while (f && fgets(line, sizeof(line), f))
		on |= !strncmp(line, "/dev/zram0", 10);
	if (f)
		fclose(f);
	if (!on && (write_str("/sys/block/zram0/disksize", "256M") ||
		    system("mkswap /dev/zram0 >/dev/null && swapon /dev/zram0"))) {
		printf("# swap on zram0 could not be set up\n");
		return -1;
	}
	if (access(CGROUP "cgroup.procs", F_OK) && system("mount -t cgroup2 none " CGROUP)) {
		printf("# cgroup2 could not be mounted\n");
		return -1;
	}
	mkdir(CGROUP "ksmfail", 0755);
	if (write_str(CGROUP "cgroup.subtree_control", "+memory") ||
	    access(CGROUP "ksmfail/memory.reclaim", W_OK)) {
		printf("# no memory cgroup to reclaim from\n");
		return -1;
	}
	return 0;
}

/*
 * Swap-in of merged pages: the area merges, reclaim in the child's memory cgroup swaps it out,
 * then MADV_POPULATE_READ faults it back in with the Nth fault point failed (a failed fault is
 * ENOMEM). The bytes must read back exact, and the area merge again.
 */
static void call_swapin(int n)
{
	char pid[16];
	char *a;
	int r;

	snprintf(pid, sizeof(pid), "%d", getpid());
	if (write_str(CGROUP "ksmfail/cgroup.procs", pid)) {
		bad("cannot join the memory cgroup: %s", strerror(errno));
		return;
	}
	a = merged_area();
	if (!a)
		return;
	/* Each round of reclaim ages the lists a little more; memory.stat's read flushes them. */
	for (int i = 0; i < 40 && swapped_out(a) < PAGES; i++) {
		write_str(CGROUP "ksmfail/memory.reclaim", "64M");
		read_long(CGROUP "ksmfail/memory.stat");
		usleep(20000);
	}
	if (swapped_out(a) < PAGES) {
		bad("%d of %d merged pages swapped out", swapped_out(a), PAGES);
		return;
	}
	nth_open();
	nth_set(n);
	r = madvise(a, PAGES * page_size, MADV_POPULATE_READ);
	result(r);
	nth_done();
	check_errno();
	if (r && madvise(a, PAGES * page_size, MADV_POPULATE_READ))
		bad("MADV_POPULATE_READ again: %s", strerror(errno));
	verify(a);
	if (check_merge(n) && wait_merged(PAGES)) {
		bad("%ld of %d pages merged again after swap-in", merging(), PAGES);
		describe_area(a);
		/* Late, or never? */
		printf("#   %s 60 s later (%ld of %d)\n",
		       wait_merged(PAGES) ? "still not merged" : "all merged", merging(), PAGES);
		describe_area(a);
	}
	verify(a);
}

/* The memory block the page at p is in: -1 if unknown. */
static long block_of(const void *p, unsigned long block_size)
{
	unsigned long long e = pagemap_of(p);

	if (!(e >> 63 & 1) || !(e & ((1ULL << 55) - 1)))
		return -1;
	return (e & ((1ULL << 55) - 1)) * page_size / block_size;
}

/*
 * The time an offlining gets: offline_pages() retries a page that does not migrate until its
 * caller gets a fatal signal, and a sweep that hangs in it says nothing but its time-out.
 * OFFLINE_MS in the environment sets the offline sweep's own in milliseconds (not the setup's):
 * 1 shows the time-out's path.
 */
#define OFFLINE_SECS 120
static long offline_ms = OFFLINE_SECS * 1000;

static unsigned long block_size;
static long target_block = -1;

/*
 * Takes node 1's free pages until one comes from the target block, so that the pages node 1
 * gives next come from it too (a block onlined again has its pages handed out last). The
 * filler stays mapped until the child exits, but for its pages in the block.
 */
static int fill_until_target(void)
{
	/* At most 256 MiB of node 1's 1 GiB, whatever the page size; steps of 64 pages. */
	const size_t max = (256UL << 20) / page_size, step = 64;
	unsigned long node1 = 2;
	char *f = mmap(NULL, max * page_size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (f == MAP_FAILED || syscall(SYS_mbind, f, max * page_size, MPOL_BIND, &node1, 64, 0))
		return -1;
	/* Until a whole step of pages came from it (the per-CPU lists hold pages of others). */
	for (size_t i = 0; i < max; i += step) {
		size_t in = 0;

		for (size_t k = i; k < i + step; k++)
			f[k * page_size] = 1;
		for (size_t k = i; k < i + step; k++)
			in += block_of(f + k * page_size, block_size) == target_block;
		/* Those pages go back free: the offline has fewer to migrate. */
		if (in == step)
			return munmap(f + i * page_size, step * page_size);
	}
	return -1;
}

/*
 * The memory block the offline sweep takes offline: the first of node 1 that is online,
 * movable, and can go offline (offlined and onlined again to find out: a block with holes, as
 * the one under the firmware's tables at the top of node 1, answers EINVAL). 0, or -1 with
 * the reason printed.
 */
static int setup_offline(void)
{
	DIR *d = opendir("/sys/devices/system/node/node1");
	struct dirent *e;

	block_size = memory_block_size();
	while (d && block_size && (e = readdir(d))) {
		long b;

		if (sscanf(e->d_name, "memory%ld", &b) != 1 ||
		    (target_block >= 0 && b > target_block) ||
		    !block_attr_is(b, "state", "online") ||
		    !block_attr_is(b, "valid_zones", "Movable") ||
		    set_block_bounded(b, "offline", OFFLINE_SECS))
			continue;
		if (set_block(b, "online_movable")) {
			printf("# block %ld went offline and could not be onlined again\n", b);
			continue;
		}
		target_block = b;
	}
	if (d)
		closedir(d);
	if (target_block < 0) {
		printf("# node 1 has no movable memory block that can go offline (boot with kernelcore=)\n");
		return -1;
	}
	/*
	 * This process takes node 1's other free pages once, for all the calls: each child's
	 * own filler then has little left to take.
	 */
	if (fill_until_target()) {
		printf("# no page of node 1 came from block %ld\n", target_block);
		return -1;
	}
	return 0;
}

/*
 * Hot-remove of a memory block that holds merged pages: an area on node 1, in the target
 * block, merges; the block goes offline with the Nth fault point failed (offlining migrates
 * the KSM pages out, their stable nodes following them). The offline succeeds, or fails with
 * C's errors; the bytes read back exact, the area stays merged, and after an offline no page
 * of the area is left in the block, which is onlined again (movable).
 */
static void call_offline(int n)
{
	unsigned long node1 = 2;
	char name[32];
	char *a;
	int r, fd, in = 0;

	cpu_set_t one;

	/* One CPU's free page lists: the filler drains those the area's pages then come from. */
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		bad("sched_setaffinity: %s", strerror(errno));
	if (fill_until_target()) {
		bad("no page of node 1 came from block %ld", target_block);
		return;
	}
	a = mmap(NULL, PAGES * page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (a == MAP_FAILED || syscall(SYS_mbind, a, PAGES * page_size, MPOL_BIND, &node1, 64, 0)) {
		bad("mmap/mbind: %s", strerror(errno));
		return;
	}
	for (int i = 0; i < PAGES; i++)
		memset(a + i * page_size, fill_of(i), page_size);
	if (madvise(a, PAGES * page_size, MADV_MERGEABLE) || wait_merged(PAGES)) {
		bad("the area did not merge first (%ld pages)", merging());
		return;
	}
	for (int i = 0; i < PAGES; i++)
		in += block_of(a + i * page_size, block_size) == target_block;
	if (!in) {
		bad("no merged page in block %ld (pages 0, 1, 31 in %ld, %ld, %ld)", target_block,
		    block_of(a, block_size), block_of(a + page_size, block_size),
		    block_of(a + 31 * page_size, block_size));
		return;
	}
	/* Fewer pages to migrate, fewer fault points that are not KSM's. */
	write_str("/proc/sys/vm/drop_caches", "1");
	snprintf(name, sizeof(name), "memory%ld/state", target_block);
	fd = open(SYSMEM, O_RDONLY | O_DIRECTORY);
	r = fd < 0 ? -1 : openat(fd, name, O_WRONLY);
	if (fd >= 0)
		close(fd);
	if (r < 0) {
		bad("%s%s: %s", SYSMEM, name, strerror(errno));
		return;
	}
	fd = r;
	nth_open();
	/*
	 * SIGALRM's default action kills, which offline_pages() sees as a fatal signal: it
	 * cancels the offlining, and the sweep reports why the child died (and fails).
	 */
	snprintf(rep->why, sizeof(rep->why), "the offline still ran after %ld ms", offline_ms);
	setitimer(ITIMER_REAL, &(struct itimerval){ .it_value = { offline_ms / 1000,
								   offline_ms % 1000 * 1000 } },
		  NULL);
	nth_set(n);
	r = write(fd, "offline", 7) == 7 ? 0 : -1;
	result(r);
	nth_done();
	setitimer(ITIMER_REAL, &(struct itimerval){ 0 }, NULL);
	rep->why[0] = 0;
	close(fd);
	if (rep->ret < 0 && rep->err != ENOMEM && rep->err != EAGAIN && rep->err != EBUSY)
		bad("offline failed with %s", strerror(rep->err));
	verify(a);
	for (int i = 0; i < PAGES && !r; i++)
		if (block_of(a + i * page_size, block_size) == target_block)
			bad("page %d is still in block %ld, offline", i, target_block);
	if (!r && set_block(target_block, "online_movable"))
		bad("block %ld could not be onlined again: %s", target_block, strerror(errno));
	if (check_merge(n) && wait_merged(PAGES))
		bad("%ld of %d pages merged after the offline", merging(), PAGES);
	verify(a);
}

/*
 * A write to each KSM knob with its Nth fault point set: the write succeeds, or fails with
 * ENOMEM (or EBUSY where C gives it); the knob then reads the new or the old value.
 */
static const struct knob {
	const char *name;
	const char *value;
	const char *other; /* written instead when the knob reads value already */
	int unmerge_first; /* the knob refuses a change while KSM pages exist (EBUSY) */
} knobs[] = {
	{ "pages_to_scan", "777", "1000", 0 },
	{ "sleep_millisecs", "3", "0", 0 },
	{ "max_page_sharing", "17", "256", 1 },
	{ "merge_across_nodes", "0", "1", 1 },
	{ "use_zero_pages", "1", "0", 0 },
	{ "stable_node_chains_prune_millisecs", "1000", "2000", 0 },
	{ "smart_scan", "0", "1", 0 },
	{ "advisor_mode", "scan-time", "none", 0 },
	{ "scan_threads", "2", "1", 0 },
	{ "merge_scope", "mm", "global", 1 },
	{ "run", "2", "1", 0 },
};

static const struct knob *knob;

/*
 * Which processes map KSM pages (smaps_rollup's "KSM:" line), as "pid comm kB, ...", to say
 * why a knob answered EBUSY.
 */
static void ksm_mappers(char *out, size_t len)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t used = 0;

	out[0] = 0;
	while (d && (e = readdir(d)) && used + 1 < len) {
		char path[300], line[128], comm[32] = "";
		FILE *f;
		long kb = 0;
		int fd;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/smaps_rollup", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "KSM:", 4))
				kb = strtol(line + 4, NULL, 10);
		fclose(f);
		if (!kb)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
		fd = open(path, O_RDONLY);
		if (fd >= 0) {
			if (read(fd, comm, sizeof(comm) - 1) > 0)
				comm[strcspn(comm, "\n")] = 0;
			close(fd);
		}
		used += snprintf(out + used, len - used, "%s%s %s %ld kB", used ? ", " : "",
				 e->d_name, comm, kb);
	}
	if (d)
		closedir(d);
}

/*
 * Copies, by writing to them, the KSM pages this process maps. A sweep's child that turns
 * PR_SET_MEMORY_MERGE on makes every VMA it has mergeable, pages it still shares with this
 * process since the fork among them (the C library's relocated read-only data, for one): a
 * merge of such a page makes it a KSM page in place on C (not on rksm, which refuses while
 * this process, not scanned, maps it: tests/vm/forkmerge.c), still mapped here with no
 * rmap_item of this process's. Once the child has exited, that page keeps
 * max_page_sharing, merge_across_nodes and merge_scope at EBUSY (C's remove_stable_node(): a
 * KSM page still mapped) until this process writes to it. A read-only private VMA is made
 * writable for the write, and read-only again.
 */
static void unshare_ksm_pages(void)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	struct {
		unsigned long from, to;
		int prot;
	} vmas[16];
	int nr = 0, prot = 0;
	unsigned long from = 0, to = 0;
	char line[256];

	while (f && fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) == 3) {
			from = a;
			/* Only private VMAs hold copy-on-write pages. */
			to = perms[3] == 'p' ? b : a;
			prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
			       (perms[2] == 'x' ? PROT_EXEC : 0);
		} else if (!strncmp(line, "KSM:", 4) && strtol(line + 4, NULL, 10) > 0 &&
			   from < to && nr < (int)ARRAY_SIZE(vmas)) {
			vmas[nr].from = from;
			vmas[nr].to = to;
			vmas[nr++].prot = prot;
		}
	}
	if (f)
		fclose(f);
	for (int i = 0; i < nr; i++) {
		size_t len = vmas[i].to - vmas[i].from;
		void *start = (void *)vmas[i].from;

		if (!(vmas[i].prot & PROT_WRITE) &&
		    mprotect(start, len, vmas[i].prot | PROT_READ | PROT_WRITE))
			continue;
		/* An atomic store, so that the compiler keeps a write of the value read. */
		for (unsigned long p = vmas[i].from; p < vmas[i].to; p += page_size)
			__atomic_store_n((char *)p, __atomic_load_n((char *)p, __ATOMIC_RELAXED),
					 __ATOMIC_RELAXED);
		if (!(vmas[i].prot & PROT_WRITE))
			mprotect(start, len, vmas[i].prot);
	}
}

/* What the knob reads, without its newline; a choice among others ("[a] b") as the choice. */
static int knob_reads(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t got = fd < 0 ? -1 : read(fd, buf, len - 1);
	char *l, *r;

	if (fd >= 0)
		close(fd);
	if (got <= 0)
		return -1;
	buf[got] = 0;
	buf[strcspn(buf, "\n")] = 0;
	l = strchr(buf, '[');
	r = l ? strchr(l, ']') : NULL;
	if (l && r) {
		*r = 0;
		memmove(buf, l + 1, strlen(l + 1) + 1);
	}
	return 0;
}

static void call_knob(int n)
{
	char path[128], was[64], now[64];
	const char *value;
	int fd, r, len;

	snprintf(path, sizeof(path), KSM "%s", knob->name);
	if (knob_reads(path, was, sizeof(was))) {
		bad("%s reads nothing", path);
		return;
	}
	/* A change, whatever the knob was set to (make torture sweeps with two threads too). */
	value = strcmp(was, knob->value) ? knob->value : knob->other;
	fd = open(path, O_WRONLY);
	if (fd < 0) {
		bad("%s: %s", path, strerror(errno));
		return;
	}
	len = strlen(value);
	nth_open();
	nth_set(n);
	r = write(fd, value, len);
	result(r == len ? 0 : -1);
	nth_done();
	close(fd);
	if (rep->ret < 0 && rep->err != ENOMEM && rep->err != EAGAIN && rep->err != EBUSY)
		bad("failed with %s", strerror(rep->err));
	if (rep->ret < 0 && rep->err == EBUSY && !rep->injected) {
		char who[120];

		ksm_mappers(who, sizeof(who));
		bad("EBUSY with nothing injected: shared %ld, sharing %ld; KSM pages mapped by: %s",
		    read_long(KSM "pages_shared"), read_long(KSM "pages_sharing"),
		    who[0] ? who : "none");
	}
	if (knob_reads(path, now, sizeof(now)))
		bad("%s reads nothing", path);
	else if (strcmp(now, rep->ret ? was : value))
		bad("reads %s after the write, not %s", now, rep->ret ? was : value);
	write_str(path, was);
}

/*
 * The scanner threads' own allocations: their Nth fault point fails while a child's area
 * merges. The child must see its area merge all the same.
 */
static pid_t ksmd_pids[8];
static int nr_ksmd;

static void find_ksmd(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;

	while (d && (e = readdir(d)) && nr_ksmd < 8) {
		char path[300], comm[32] = "";
		int fd;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		if (read(fd, comm, sizeof(comm) - 1) > 0 && !strncmp(comm, "ksmd", 4))
			ksmd_pids[nr_ksmd++] = atoi(e->d_name);
		close(fd);
	}
	if (d)
		closedir(d);
}

static int nth_of(pid_t pid, int set)
{
	char path[64], buf[16] = "";
	int fd, v = -1;

	snprintf(path, sizeof(path), "/proc/%d/fail-nth", pid);
	fd = open(path, O_RDWR);
	if (fd < 0)
		return -1;
	if (set >= 0) {
		snprintf(buf, sizeof(buf), "%d", set);
		v = pwrite(fd, buf, strlen(buf), 0) > 0 ? set : -1;
	} else if (pread(fd, buf, sizeof(buf) - 1, 0) > 0) {
		v = atoi(buf);
	}
	close(fd);
	return v;
}

static void call_ksmd(int n)
{
	char *a;

	find_ksmd();
	if (!nr_ksmd) {
		bad("no ksmd thread found");
		return;
	}
	for (int i = 0; i < nr_ksmd; i++)
		nth_of(ksmd_pids[i], n);
	a = merged_area();
	rep->injected = 0;
	for (int i = 0; i < nr_ksmd; i++) {
		if (nth_of(ksmd_pids[i], -1) == 0)
			rep->injected = 1;
		nth_of(ksmd_pids[i], 0);
	}
	if (a)
		verify(a);
}

/* ---- the sweeps ---- */

static const struct sweep {
	const char *name;
	void (*call)(int n);
} sweeps[] = {
	{ "madvise", call_madvise },
	{ "madvise_split", call_madvise_split },
	{ "unmerge", call_unmerge },
	{ "prctl_on", call_prctl_on },
	{ "prctl_off", call_prctl_off },
	{ "fork", call_fork },
	{ "exec", call_exec },
	{ "exit", call_exit },
	{ "move_pages", call_move_pages },
	{ "swapin", call_swapin },
	{ "offline", call_offline },
	{ "knobs", NULL },
	{ "ksmd", call_ksmd },
};

static int tap_n;

static const char *what(void)
{
	static char buf[32];

	if (rep->ret >= 0)
		return "ok";
	switch (rep->err) {
	case ENOMEM:
		return "ENOMEM";
	case EAGAIN:
		return "EAGAIN";
	case EBUSY:
		return "EBUSY";
	case E2BIG:
		return "E2BIG";
	case ENOEXEC:
		return "ENOEXEC";
	case KILLED:
		return "killed past the point of no return";
	}
	snprintf(buf, sizeof(buf), "errno %d", rep->err);
	return buf;
}

/* One sweep of a call: 1 if it passed. */
static int sweep(const char *name, void (*call)(int n))
{
	int n, injected = 0, counts[3] = { 0 }, ok = 1;
	char why[260] = "";

	for (n = 1; n <= max_calls; n += stride && n >= 16 ? stride : 1) {
		pid_t pid;
		int status;

		memset(rep, 0, sizeof(*rep));
		pid = fork();
		if (pid == 0) {
			/* Mapped before the call: a fault on it must not take the Nth fault point. */
			rep->injected = 0;
			call(n);
			_exit(0);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid) {
			snprintf(why, sizeof(why), "fork/wait: %s", strerror(errno));
			ok = 0;
			break;
		}
		printf("# %s %d %s%s%s%s\n", name, n, what(), rep->injected ? " injected" : "",
		       rep->bad ? ": " : "", rep->bad ? rep->why : "");
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			snprintf(why, sizeof(why), "call %d: the child died (status %#x)%s%.200s", n,
				 status, rep->why[0] ? ": " : "", rep->why);
			ok = 0;
			break;
		}
		if (rep->bad) {
			snprintf(why, sizeof(why), "call %d: %s", n, rep->why);
			ok = 0;
			break;
		}
		if (rep->injected)
			counts[rep->ret >= 0 ? 0 : rep->err == EBUSY ? 2 : 1]++;
		if (!rep->injected) {
			if (rep->ret < 0) {
				snprintf(why, sizeof(why), "call %d, nothing injected, failed: %s", n,
					 what());
				ok = 0;
			}
			break;
		}
		injected++;
	}
	if (ok && n > max_calls) {
		snprintf(why, sizeof(why), "still injecting after %d calls", max_calls);
		ok = 0;
	}
	fflush(stdout);
	printf("%s %d - %s: %d calls with an allocation failed%s: %d succeeded, %d failed cleanly, %d EBUSY%s%s\n",
	       ok ? "ok" : "not ok", ++tap_n, name, injected,
	       stride ? " (short: N = 1 to 16, then every Sth)" : "", counts[0], counts[1],
	       counts[2], ok ? "" : "; ", why);
	fflush(stdout);
	return ok;
}

static const char *const counters[] = {
	"pages_shared", "pages_sharing", "pages_unshared", "pages_volatile", "ksm_zero_pages",
};

int main(int argc, char **argv)
{
	int opt, failed = 0, planned = 0;
	const char *only[32];
	int nr_only = 0;

	page_size = getpagesize();
	if (getenv("OFFLINE_MS") && atol(getenv("OFFLINE_MS")) > 0)
		offline_ms = atol(getenv("OFFLINE_MS"));
	if (argc == 2 && !strcmp(argv[1], "--exec-child")) {
		/*
		 * First, whether the exec reached its Nth fault point, and injection off; then the
		 * checks. Exit 5 if the exec ran with no fault point failed (or the open below
		 * was the Nth), 6 if one was.
		 */
		char path[64], buf[16] = "";
		int fd, injected, r;

		snprintf(path, sizeof(path), "/proc/self/task/%ld/fail-nth",
			 (long)syscall(SYS_gettid));
		fd = open(path, O_RDWR);
		if (fd < 0)
			return errno == ENOMEM ? 5 : 7;
		if (pread(fd, buf, sizeof(buf) - 1, 0) <= 0)
			return 7;
		injected = atoi(buf) == 0;
		if (pwrite(fd, "0", 1, 0) != 1)
			return 7;
		r = exec_child();
		return r ? r : injected ? 6 : 5;
	}
	{
		/*
		 * The exec sweep runs a copy in /tmp (tmpfs): over 9p, where the guest finds this
		 * program, a failed allocation while execve() reads the file underflows a netfs
		 * request's reference count in 6.12.117 (netfs_put_request(), from
		 * netfs_unbuffered_read_iter(): a WARNING, on both kernels), which is not KSM's.
		 */
		static char buf[1 << 16];
		int in = open("/proc/self/exe", O_RDONLY);
		int out = open("/tmp/ksmfail.exec", O_WRONLY | O_CREAT | O_TRUNC, 0755);
		ssize_t n;

		if (in < 0 || out < 0)
			return 2;
		while ((n = read(in, buf, sizeof(buf))) > 0)
			if (write(out, buf, n) != n)
				return 2;
		close(in);
		if (close(out) || n < 0)
			return 2;
		self_exe = "/tmp/ksmfail.exec";
	}
	while ((opt = getopt(argc, argv, "mn:s:")) != -1) {
		if (opt == 'm')
			every_merge = 1;
		else if (opt == 's')
			stride = atoi(optarg);
		else if (opt == 'n')
			max_calls = atoi(optarg);
		else
			return 2;
	}
	for (; optind < argc && nr_only < 32; optind++)
		only[nr_only++] = argv[optind];
	/*
	 * No core dumps: a process killed past exec's point of no return would keep its KSM pages
	 * mapped while it dumps, and the knobs that need none would answer EBUSY meanwhile.
	 */
	setrlimit(RLIMIT_CORE, &(struct rlimit){ 0, 0 });
	rep = mmap(NULL, sizeof(*rep), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (rep == MAP_FAILED)
		return 2;
	/*
	 * Allocations that may sleep fail too (fault injection leaves them alone by default), and
	 * single pages, and the pages of user memory (__GFP_HIGHMEM, set on every architecture);
	 * no stack trace per failure (the log would drown).
	 */
	if (write_str(DBG "failslab/ignore-gfp-wait", "N") ||
	    write_str(DBG "fail_page_alloc/ignore-gfp-wait", "N") ||
	    write_str(DBG "fail_page_alloc/min-order", "0") ||
	    write_str(DBG "fail_page_alloc/ignore-gfp-highmem", "N") ||
	    write_str(DBG "failslab/verbose", "0") ||
	    write_str(DBG "fail_page_alloc/verbose", "0")) {
		printf("1..1\nnot ok 1 - fault injection is not set up (%s)\n", strerror(errno));
		return 1;
	}
	if (write_str(KSM "run", "1") || write_str(KSM "sleep_millisecs", "0") ||
	    write_str(KSM "pages_to_scan", "1000")) {
		printf("1..1\nnot ok 1 - cannot set KSM's knobs\n");
		return 1;
	}
	for (size_t i = 0; i < ARRAY_SIZE(sweeps); i++) {
		int chosen = !nr_only;

		for (int j = 0; j < nr_only; j++)
			chosen |= !strcmp(only[j], sweeps[i].name);
		if (!chosen)
			continue;
		if (sweeps[i].call) {
			planned++;
		} else {
			for (size_t k = 0; k < ARRAY_SIZE(knobs); k++) {
				char path[128];

				snprintf(path, sizeof(path), KSM "%s", knobs[k].name);
				planned += access(path, W_OK) == 0;
			}
		}
	}
	printf("1..%d\n", planned + 1);
	for (size_t i = 0; i < ARRAY_SIZE(sweeps); i++) {
		int chosen = !nr_only, smart_off;

		for (int j = 0; j < nr_only; j++)
			chosen |= !strcmp(only[j], sweeps[i].name);
		if (!chosen)
			continue;
		/*
		 * Pages this process shares with the children of earlier sweeps that turned
		 * PR_SET_MEMORY_MERGE on may be KSM pages C's reverse map cannot find here
		 * (tests/vm/forkmerge.c): no migration moves them, so copy them first.
		 */
		if (sweeps[i].call == call_offline && target_block < 0)
			unshare_ksm_pages();
		if (sweeps[i].call == call_offline && target_block < 0 && setup_offline()) {
			printf("not ok %d - offline: no memory block to take offline\n", ++tap_n);
			failed++;
			continue;
		}
		if (sweeps[i].call == call_swapin && setup_swap()) {
			printf("not ok %d - swapin: no swap to swap to\n", ++tap_n);
			failed++;
			continue;
		}
		/*
		 * The swap-in sweep's area is pairs of equal pages only. C 6.12's smart scan
		 * counts each page's skips from its own last look, so a pair whose pages it looks
		 * at in different passes never merges again (tests/vm/skipphase.c shows it, a
		 * C_DEFECTS case of tests/report.py): on C, at random, a swap-in's area did not
		 * merge again within the sweep's minute. This sweep is about swap-in's failures,
		 * so on C it runs without smart scan; rksm (scan_threads is its knob) keeps it.
		 */
		smart_off = sweeps[i].call == call_swapin && access(KSM "scan_threads", F_OK) &&
			    ksm_knob("smart_scan") == 1;
		if (smart_off) {
			printf("# swapin: smart_scan 0 (C KSM keeps pairs apart: skipphase)\n");
			write_str(KSM "smart_scan", "0");
		}
		if (sweeps[i].call) {
			failed += !sweep(sweeps[i].name, sweeps[i].call);
			if (smart_off)
				write_str(KSM "smart_scan", "1");
			continue;
		}
		for (size_t k = 0; k < ARRAY_SIZE(knobs); k++) {
			char path[128], name[96];

			snprintf(path, sizeof(path), KSM "%s", knobs[k].name);
			/* rksm's own knobs are absent on C. */
			if (access(path, W_OK))
				continue;
			knob = &knobs[k];
			if (knob->unmerge_first) {
				unshare_ksm_pages();
				write_str(KSM "run", "2");
			}
			snprintf(name, sizeof(name), "knob %s", knob->name);
			failed += !sweep(name, call_knob);
			write_str(KSM "run", "1");
		}
	}
	/* Every counter zero once everything is unmerged (every child has exited). */
	{
		char bad_counters[256] = "";

		write_str(KSM "run", "2");
		for (size_t i = 0; i < ARRAY_SIZE(counters); i++) {
			char path[128];
			long v;

			snprintf(path, sizeof(path), KSM "%s", counters[i]);
			v = read_long(path);
			if (v != 0 && access(path, R_OK) == 0)
				snprintf(bad_counters + strlen(bad_counters),
					 sizeof(bad_counters) - strlen(bad_counters), " %s=%ld",
					 counters[i], v);
		}
		printf("%s %d - every counter 0 after run=2%s%s\n", bad_counters[0] ? "not ok" : "ok",
		       ++tap_n, bad_counters[0] ? ":" : "", bad_counters);
		failed += !!bad_counters[0];
		write_str(KSM "run", "1");
	}
	write_str(KSM "sleep_millisecs", "20");
	write_str(KSM "pages_to_scan", "100");
	return failed ? 1 : 0;
}
