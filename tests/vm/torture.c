// SPDX-License-Identifier: GPL-2.0
/*
 * torture: a randomized stress test of KSM that can fail.
 *
 *   torture [-d SECONDS] [-w WORKERS] [-m MIB_PER_WORKER] [-t SCAN_THREADS_LIST] [-s SEED] [-q]
 *           [-F] [-g SECOND_CGROUP_DIR] [-S global|memcg|mm]
 *
 * Workers (half madvise(MADV_MERGEABLE), half prctl(PR_SET_MEMORY_MERGE)) fill anonymous memory
 * with pages of few contents (zero, 15 patterns shared by all, some unique), so that most pages
 * merge within and across processes. The expected content of every page is a small record
 * (class, seed, one patched word) in a MAP_SHARED anonymous mapping, which KSM never merges, so
 * every byte can be checked at any time. Workers do random operations (COW word writes,
 * rewrites, fork, munmap+mmap, mremap, mprotect, MADV_(UN)MERGEABLE, PR_SET_MEMORY_MERGE 0/1,
 * MADV_DONTNEED, MADV_PAGEOUT, move_pages(), a THP area each) and check the pages they touch
 * before and after, and all of their pages every 2 s. Two more processes: a bystander, whose
 * THP memory is not mergeable and must never be seen by KSM, and a churner, which unmaps all of
 * its mergeable memory and at once maps new duplicate pages, which must still merge.
 * The main process flips the KSM knobs meanwhile; threads write invalid values to every knob and
 * compact memory; a watchdog thread declares a hang when a process makes no progress for 60 s.
 * At the end: merging must have been seen, every page must verify, and run=2 must leave no KSM
 * page behind. A table goes to stdout, then TAP; the exit status is 0 only if all tests passed.
 * -F (self-test) alters one expected record mid-run: the run must then fail.
 * Under rksm's merge_scope memcg or mm, no KSM frame may be mapped by workers of two merge
 * domains (see "merge domains" below); -g moves half of the workers to a second memory cgroup.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORDS (PAGE / 8)
#define KSM "/sys/kernel/mm/ksm/"
#define HPAGE_PMD_SIZE "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size"
#define PR_SET_MEMORY_MERGE_ 67
#define PR_GET_MEMORY_MERGE_ 68
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#define MPOL_MF_MOVE_ALL_ 4
#define UNIQUE 16		/* page class with content of its own; 0 is zero, 1..15 shared */
#define NOPATCH 0xffff
#define NAREA 4			/* areas per worker; area 1 is THP-backed */
#define BYSTANDER_MIB 8		/* the bystander's memory, in NAREA areas */
#define MAXW 40
#define NMSG 12
#define HANG_MS 60000
/*
 * The controller's knob writes wait for the scanner's batch in progress (C's run, merge_across_nodes
 * and max_page_sharing stores take ksm_thread_mutex, which ksmd holds for pages_to_scan pages): up
 * to 5000 pages at KASAN's speed under TCG took 14 s to 17 s. The report shows the slowest write.
 */
#define CTL_HANG_MS 240000
#define ARRAY_SIZE(x) ((int)(sizeof(x) / sizeof((x)[0])))
#define ADD(x, n) __atomic_fetch_add(&(x), (n), __ATOMIC_RELAXED)
#define RW (PROT_READ | PROT_WRITE)
#define ANON (MAP_PRIVATE | MAP_ANONYMOUS)

enum { K_MADV, K_PRCTL, K_BYSTANDER, K_CHURN };
static const char *const kind_name[] = { "madvise", "prctl", "bystander", "churn" };
enum { PH_RUN, PH_QUIESCE, PH_VERIFY, PH_UNMERGED };

/* Counters in shared memory: the operations first, then the rest. */
enum { OP_VERIFY, OP_WORD, OP_REWRITE, OP_FORK, OP_REFILL, OP_MREMAP, OP_MPROTECT, OP_TOGGLE,
	OP_DONTNEED, OP_PAGEOUT, OP_MIGRATE, OP_REUSE, OP_FULL, OP_CHURN, OP_COMPACT,
	C_FORKS, C_CHILD_SIG, C_CHILD_BAD, C_PRCTL, C_MOVED, C_QUERIES, C_ON_NODE,
	C_ENOENT, C_EBUSY, C_EACCES, C_EFAULT, C_ENOMEM, C_RUN2_MIGRATE,
	C_CHURN_OK, C_CHURN_FAIL, C_CHURN_UNKNOWN, C_BYSTANDER_KSM,
	C_SYS_BAD, C_SYSFS_BAD, C_BAD_WRITES, C_BAD_OK, C_FRAME_CHECKS, C_ACROSS_WORKERS,
	C_ACROSS_DOMAINS, C_NR };
static const char *const name[] = { "verify range", "COW word write", "page rewrite",
	"fork+child verify", "munmap+mmap refill", "mremap move", "mprotect RO/RW",
	"unmergeable/mergeable", "MADV_DONTNEED", "MADV_PAGEOUT", "move_pages", "free+fork reuse",
	"full verify", "churn remap", "compact_memory", "children forked", "children killed",
	"children failed (exit 2)", "prctl merge toggles", "move_pages: moved",
	"move_pages: 1 node, queries", "move_pages: on target node", "move_pages: ENOENT",
	"move_pages: EBUSY", "move_pages: EACCES", "move_pages: EFAULT (zero pg)",
	"move_pages: ENOMEM", "move_pages during run=2", "churn rounds merged",
	"churn rounds NOT merged", "churn rounds inconclusive", "bystander seen by KSM",
	"syscall errno surprises", "sysfs errno surprises", "invalid knob writes",
	"... refused as expected", "frame checks", "frames in 2 workers at end",
	"FRAMES ACROSS DOMAINS" };
static_assert(ARRAY_SIZE(name) == C_NR, "a name for every counter");
/* How often each operation is picked, and how many pages it works on at most. */
static const int op_weight[OP_FULL] = { 20, 25, 15, 2, 4, 4, 4, 3, 4, 3, 6, 2 };
static const int op_pages[OP_FULL + 1] = { 128, 1, 16, 1, 64, 64, 64, 256, 64, 256, 64, 32, 1 };

struct wslot {			/* one per worker process, written by it and by its children */
	pid_t pid, child;
	int kind, op, done, reaped, early, status, have_first;
	int cg, area_gen;	/* cg: in the second cgroup (-g); area_gen: odd while areas change */
	uintptr_t base[NAREA];	/* the areas as the worker last published them */
	long npg[NAREA];
	int64_t beat, ops, verified, mism;
	long thp_kb[2];		/* bystander: AnonHugePages at the start and at the end */
	char first[400];	/* the first mismatch seen: enough to debug it without a rerun */
};

/* What the processes share: a MAP_SHARED anonymous mapping, which KSM never merges. */
static struct shared {
	int phase, unmerging, run_gen, run_now, hang, finished, reported, nmsg;
	int64_t ctl_beat, churn_wait, cnt[C_NR];	/* churn_wait: when a churn round began waiting */
	char msg[NMSG][120];
	struct wslot w[MAXW];
} *sh;

struct rec {			/* the expected content of one page */
	uint64_t seed, pval;
	uint16_t patch;
	uint8_t cls;
};

/*
 * The kernel's page size, and the size of its PMD-mapped transparent huge page (the page size
 * where it has none), set first thing in main().
 */
static unsigned long PAGE, HPAGE;
static int nnodes, nodes[2], fault_inject, quiet, nw = 4, nslots;
static long duration = 60, mib = 8;
static uint64_t seed0, rs;

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

/* Count what no kernel should do (counter c, or none: -1); keep the first few messages. */
static void surprise(int c, const char *fmt, ...)
{
	int i = ADD(sh->nmsg, 1);
	va_list ap;

	if (c >= 0)
		ADD(sh->cnt[c], 1);
	if (i >= NMSG)
		return;
	va_start(ap, fmt);
	vsnprintf(sh->msg[i], sizeof(sh->msg[i]), fmt, ap);
	va_end(ap);
}

static int read_file(const char *path, char *buf, int size)
{
	int fd = open(path, O_RDONLY), n = fd < 0 ? -1 : (int)read(fd, buf, size - 1);

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n;
}

/* The number after key in a file (key NULL: at its start), or -1. */
static long read_long(const char *path, const char *key)
{
	char buf[4096], *p;

	if (read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	p = key ? strstr(buf, key) : buf;
	return p ? strtol(p + (key ? strlen(key) : 0), NULL, 10) : -1;
}

static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* ------------------------------------------------------------------ pages and their records */

static struct area {
	char *base;
	long n, r0;		/* pages, index of the first one's record */
	int thp;
} ar[NAREA];
static struct rec *rec;
static struct wslot *ws;
static long tot;
static int kind, in_child;
static int64_t verified;

/* Word i of a page: the patch, zero, or a hash of the class (shared) or of the seed (unique). */
static uint64_t word_of(const struct rec *r, unsigned int i)
{
	if (i == r->patch)
		return r->pval;
	if (!r->cls)
		return 0;
	return mix((r->cls == UNIQUE ? r->seed : r->cls * 0x9e3779b97f4a7c15ULL) + i);
}

#define pg(a, j) (ar[a].base + (j) * PAGE)	/* page j of area a */
#define rc(a, j) (&rec[ar[a].r0 + (j)])		/* its record */

static void fill(int a, long j)
{
	uint64_t *w = (uint64_t *)pg(a, j);
	unsigned int i;

	for (i = 0; i < WORDS; i++)
		w[i] = word_of(rc(a, j), i);
}

/* Publish where the areas are, for the controller's frame checks (a child has no areas of its own). */
static void publish(void)
{
	int a;

	if (in_child)
		return;
	__atomic_fetch_add(&ws->area_gen, 1, __ATOMIC_SEQ_CST);
	for (a = 0; a < NAREA; a++) {
		ws->base[a] = (uintptr_t)ar[a].base;
		ws->npg[a] = ar[a].n;
	}
	__atomic_fetch_add(&ws->area_gen, 1, __ATOMIC_SEQ_CST);
}

static void beat(void)
{
	ws->beat = now_ms();
	ADD(ws->verified, verified);
	verified = 0;
}

static void die(const char *what)
{
	surprise(C_SYS_BAD, "%s worker %d: %s: %s", kind_name[kind], (int)(ws - sh->w), what,
		 strerror(errno));
	_exit(2);
}

/*
 * Compare page j of area a with its record. On a difference, print where (and keep the first
 * one for the report, with the 16 bytes around it), and repair the page if it is writable, so
 * that one corruption is counted once.
 */
static int check(int a, long j, int repair)
{
	const volatile uint64_t *w = (const volatile uint64_t *)pg(a, j);
	const struct rec *r = rc(a, j);
	long i, off, k, n;
	char line[400];

	verified++;
	for (i = 0; i < (long)WORDS; i++)
		if (w[i] != word_of(r, i))
			break;
	if (i == (long)WORDS)
		return 0;
	off = i * 8 + __builtin_ctzll(w[i] ^ word_of(r, i)) / 8;
	n = snprintf(line, 200, "%s worker %d%s in %s: area %d page %ld offset %ld (class %d",
		     kind_name[kind], (int)(ws - sh->w), in_child ? " (child)" : "", name[ws->op],
		     a, j, off, r->cls);
	n += snprintf(line + n, 40, ", patch %d)", r->patch == NOPATCH ? -1 : r->patch);
	n = n < 199 ? n : 199;
	for (k = 0; k < 32; k++) {	/* the 16 bytes from off & ~15: expected, then got */
		i = (off & ~15L) + k % 16;	/* byte i: of word i / 8 */
		if (k % 16 == 0)
			n += sprintf(line + n, k ? "\n  got     " : "\n  expected");
		n += sprintf(line + n, " %02x", (int)(uint8_t)((k < 16 ? word_of(r, i / 8) :
								  w[i / 8]) >> (i % 8 * 8)));
	}
	sprintf(line + n, "   (bytes %ld..%ld)", off & ~15L, (off & ~15L) + 15);
	fprintf(stderr, "MISMATCH %s\n", line);
	ADD(ws->mism, 1);
	if (!__atomic_exchange_n(&ws->have_first, 1, __ATOMIC_RELAXED))
		memcpy(ws->first, line, sizeof(line));
	if (repair)
		fill(a, j);
	return 1;
}

static int verify_range(int a, long j, long n, int repair)
{
	int bad = 0;
	long k;

	for (k = j; k < j + n; k++) {
		bad += check(a, k, repair);
		if ((k & 255) == 255)
			beat();
	}
	return bad;
}

static int verify_all(void)
{
	int a, bad = 0;

	for (a = 0; a < NAREA; a++)
		bad += verify_range(a, 0, ar[a].n, 1);
	beat();
	return bad;
}

/* New content for pages: 20% zero, 65% one of the 15 shared patterns, 15% unique. */
static void rewrite(int a, long j, long n)
{
	unsigned int x;
	long k;

	for (k = j; k < j + n; k++) {
		x = rnd() % 100;
		*rc(a, k) = (struct rec){ rnd(), 0, NOPATCH,
					  x < 20 ? 0 : x < 85 ? 1 + rnd() % 15 : UNIQUE };
		fill(a, k);
	}
}

/* One word of a page changes (a COW break if it was merged); an older patch is undone first. */
static void word_write(int a, long j)
{
	struct rec *r = rc(a, j);
	uint64_t *w = (uint64_t *)pg(a, j);
	unsigned int old = r->patch;

	if (old != NOPATCH) {
		r->patch = NOPATCH;
		w[old] = word_of(r, old);
	}
	r->patch = rnd() % WORDS;
	r->pval = rnd() | 1;
	w[r->patch] = r->pval;
}

static void pick(int *a, long *j, long *n, long max)
{
	*a = rnd() % NAREA;
	*j = rnd() % ar[*a].n;
	*n = 1 + rnd() % max;
	if (*j + *n > ar[*a].n)
		*n = ar[*a].n - *j;
}

static void madv(char *p, long n, int advice, const char *what)
{
	if (madvise(p, n * PAGE, advice))
		surprise(C_SYS_BAD, "madvise(%s): %s", what, strerror(errno));
}

/* Map n pages (at a fixed place, or huge page aligned), THP and mergeable as asked. */
static char *map_area(char *at, long n, int thp, int mergeable)
{
	size_t len = n * PAGE;
	char *raw;

	if (!at) {
		raw = mmap(NULL, len + HPAGE, PROT_NONE, ANON, -1, 0);
		if (raw == MAP_FAILED)
			die("mmap");
		at = (char *)(((uintptr_t)raw + HPAGE - 1) & ~(HPAGE - 1));
		if (at > raw)
			munmap(raw, at - raw);
		munmap(at + len, raw + HPAGE - at);
	}
	if (mmap(at, len, RW, ANON | MAP_FIXED, -1, 0) == MAP_FAILED)
		die("mmap fixed");
	if (thp)
		madv(at, n, MADV_HUGEPAGE, "MADV_HUGEPAGE");
	if (mergeable && kind != K_PRCTL)
		madv(at, n, MADV_MERGEABLE, "MADV_MERGEABLE");
	return at;
}

/* ---------------------------------------------------------------------------- operations */

/*
 * fork() with records of the child's own, copied before fork() so that no write of the parent
 * races with the copy. The parent frees the copy in reap_child().
 */
static pid_t fork_child(struct rec **copy)
{
	pid_t pid;

	*copy = mmap(NULL, tot * sizeof(*rec), RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (*copy == MAP_FAILED)
		die("mmap records");
	memcpy(*copy, rec, tot * sizeof(*rec));
	ADD(sh->cnt[C_FORKS], 1);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		rec = *copy;
		in_child = 1;
		rs = mix(rs ^ getpid()) | 1;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
	}
	return pid;
}

/* A child killed by a signal, or failing (exit 2), fails the run; exit 1 is a mismatch. */
static void reap_child(pid_t pid, struct rec *copy)
{
	int st;

	ws->child = pid;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	ws->child = 0;
	munmap(copy, tot * sizeof(*rec));
	if (WIFSIGNALED(st))
		surprise(C_CHILD_SIG, "worker %d: child killed by signal %d", (int)(ws - sh->w),
			 WTERMSIG(st));
	else if (WEXITSTATUS(st) > 1)
		ADD(sh->cnt[C_CHILD_BAD], 1);
}

/* The child checks every page, writes some, checks again; the parent writes meanwhile. */
static void op_fork(void)
{
	struct rec *copy;
	pid_t pid = fork_child(&copy);
	int a, i, bad = pid ? 0 : verify_all();
	long j, n;

	for (i = 0; i < (pid ? 8 : 16); i++) {
		pick(&a, &j, &n, pid || i % 2 ? 1 : 8);
		if (n > 1)
			rewrite(a, j, n);
		else
			word_write(a, j);
		verify_range(a, j, n, 1);
	}
	if (!pid)
		_exit(bad + verify_all() ? 1 : 0);
	reap_child(pid, copy);
	verify_all();
}

/* Scenario (b): free (likely merged) pages; a child and the parent then map fresh ones there. */
static void op_reuse(int a, long j, long n)
{
	struct rec *copy;
	int i, bad = 0;
	pid_t pid;

	if (munmap(pg(a, j), n * PAGE))
		die("munmap");
	pid = fork_child(&copy);
	map_area(pg(a, j), n, ar[a].thp, 1);
	rewrite(a, j, n);
	if (pid == 0) {
		for (i = 0; i < 4; i++, usleep(50000))
			bad += verify_all();
		_exit(bad ? 1 : 0);
	}
	reap_child(pid, copy);
}

/* Move a range away and back, or (1 in 8) a whole area to a new place for good. */
static void op_mremap(int a, long *j, long *n)
{
	char *tmp, *src;

	if (rnd() % 8 == 0) {
		*j = 0;
		*n = ar[a].n;
	}
	src = pg(a, *j);
	tmp = map_area(NULL, *n, 0, 0);
	if (mremap(src, *n * PAGE, *n * PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, tmp) == MAP_FAILED) {
		/*
		 * Before 6.17, mremap() moves a range of one area only: one that mprotect() or
		 * MADV_(UN)MERGEABLE split into several fails with EFAULT, and nothing moves.
		 */
		if (errno != EFAULT)
			die("mremap");
		munmap(tmp, *n * PAGE);
		return;
	}
	ar[a].base += tmp - src;	/* check the pages where they are now */
	verify_range(a, *j, *n, 1);
	ar[a].base -= tmp - src;
	if (*n == ar[a].n) {
		ar[a].base = tmp;
		publish();
	} else if (mremap(tmp, *n * PAGE, *n * PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, src) ==
		 MAP_FAILED)
		die("mremap back");
}

/* Unmerge and merge again: MADV_(UN)MERGEABLE on a range, or (prctl workers) the process. */
static void op_toggle(int a, long j, long n)
{
	if (kind == K_PRCTL && rnd() % 2) {
		if (prctl(PR_SET_MEMORY_MERGE_, 0, 0, 0, 0) ||
		    prctl(PR_GET_MEMORY_MERGE_, 0, 0, 0, 0))
			surprise(C_SYS_BAD, "PR_SET_MEMORY_MERGE 0: %s", strerror(errno));
		verify_range(a, j, n, 1);
		if (prctl(PR_SET_MEMORY_MERGE_, 1, 0, 0, 0) ||
		    prctl(PR_GET_MEMORY_MERGE_, 0, 0, 0, 0) != 1)
			surprise(C_SYS_BAD, "PR_SET_MEMORY_MERGE 1: %s", strerror(errno));
		ADD(sh->cnt[C_PRCTL], 1);
		return;
	}
	madv(pg(a, j), n, MADV_UNMERGEABLE, "MADV_UNMERGEABLE");
	verify_range(a, j, n, 1);
	madv(pg(a, j), n, MADV_MERGEABLE, "MADV_MERGEABLE");
}

/*
 * move_pages() between nodes 0 and 1, merged pages too (MPOL_MF_MOVE_ALL: we are root). Pages
 * that cannot move say why in their status: ENOENT, EBUSY, EACCES, EFAULT (the zero page) and
 * ENOMEM are fine, anything else is a surprise. With one node, only ask where the pages are.
 */
static void op_migrate(int a, long j, long n)
{
	static const int ok_err[5] = { ENOENT, EBUSY, EACCES, EFAULT, ENOMEM };
	int node[64], st[64], i, target = nodes[rnd() % 2];
	void *addr[64];
	long k, ret;

	for (k = 0; k < n; k++) {
		addr[k] = pg(a, j + k);
		node[k] = target;
		/* 6.12 leaves the status of pages it failed to move (a positive return) unset. */
		st[k] = -EBUSY;
	}
	ADD(sh->cnt[C_RUN2_MIGRATE], sh->unmerging);
	ADD(sh->cnt[C_QUERIES], nnodes < 2);
	ret = syscall(SYS_move_pages, 0, n, addr, nnodes < 2 ? NULL : node, st,
		      nnodes < 2 ? 0 : MPOL_MF_MOVE_ALL_);
	if (ret < 0 && errno != ENOENT && errno != EBUSY && errno != EACCES)
		surprise(C_SYS_BAD, "move_pages: %s", strerror(errno));
	for (k = 0; ret >= 0 && k < n; k++) {
		for (i = 0; i < 5 && ok_err[i] != -st[k]; i++)
			;
		if (st[k] >= 0)
			ADD(sh->cnt[nnodes < 2 ? C_ON_NODE : C_MOVED], st[k] == target);
		else if (i < 5)
			ADD(sh->cnt[C_ENOENT + i], 1);
		else
			surprise(C_SYS_BAD, "move_pages status %d", st[k]);
	}
}

static int pick_op(void)
{
	int w = 0, i, x;

	if (sh->unmerging && rnd() % 2)	/* scenario (c): migrate while run=2 unmerges */
		return OP_MIGRATE;
	for (i = 0; i < OP_FULL; i++)
		w += op_weight[i];
	for (x = rnd() % w, i = 0; x >= op_weight[i]; i++)
		x -= op_weight[i];
	return i;
}

/* One operation on a random range: its pages are checked before and after it. */
static void do_op(int op)
{
	int a;
	long j, n, k;

	ws->op = op;
	pick(&a, &j, &n, op_pages[op]);
	verify_range(a, j, n, 1);
	switch (op) {
	case OP_WORD:
		word_write(a, j);
		break;
	case OP_REWRITE:
		rewrite(a, j, n);
		break;
	case OP_FORK:
		op_fork();
		break;
	case OP_REFILL:
		if (munmap(pg(a, j), n * PAGE))
			die("munmap");
		map_area(pg(a, j), n, ar[a].thp, 1);
		rewrite(a, j, n);
		break;
	case OP_MREMAP:
		op_mremap(a, &j, &n);
		break;
	case OP_MPROTECT:
		if (mprotect(pg(a, j), n * PAGE, PROT_READ))
			die("mprotect");
		verify_range(a, j, n, 0);
		if (mprotect(pg(a, j), n * PAGE, RW))
			die("mprotect");
		break;
	case OP_TOGGLE:
		op_toggle(a, j, n);
		break;
	case OP_DONTNEED:	/* the pages read as zero from now on */
		madv(pg(a, j), n, MADV_DONTNEED, "MADV_DONTNEED");
		for (k = j; k < j + n; k++)
			*rc(a, k) = (struct rec){ 0, 0, NOPATCH, 0 };
		break;
	case OP_PAGEOUT:	/* a no-op without swap; contents must survive either way */
		if (madvise(pg(a, j), n * PAGE, MADV_PAGEOUT) && errno != EINVAL)
			surprise(C_SYS_BAD, "madvise(MADV_PAGEOUT): %s", strerror(errno));
		break;
	case OP_MIGRATE:
		op_migrate(a, j, n);
		break;
	case OP_REUSE:
		op_reuse(a, j, n);
		break;
	case OP_FULL:
		verify_all();
		break;
	}
	verify_range(a, j, n, 1);
	ADD(sh->cnt[op], 1);
	ADD(ws->ops, 1);
	beat();
}

/* -------------------------------------------------------------------------------- workers */

/* The bystander: THP and never mergeable. Any KSM state in this process is a bug. */
static void bystander_loop(void)
{
	int a;
	long j, n;

	ws->thp_kb[0] = read_long("/proc/self/smaps_rollup", "AnonHugePages:");
	while (sh->phase == PH_RUN && !sh->hang) {
		ws->op = OP_FULL;
		verify_all();
		pick(&a, &j, &n, 1);
		word_write(a, j);
		if (read_long("/proc/self/ksm_merging_pages", NULL) > 0 ||
		    read_long("/proc/self/ksm_stat", "ksm_rmap_items ") > 0)
			ADD(sh->cnt[C_BYSTANDER_KSM], 1);
		usleep(200000);
	}
	ws->thp_kb[1] = read_long("/proc/self/smaps_rollup", "AnonHugePages:");
}

/*
 * Scenario (a): unmap all mergeable memory and at once map new duplicates, eight times over; the
 * ninth area must merge within 12 full scans (run=0 and run=2 reset ksmd's rmap state and the
 * count). Every area is at a new address, so that its rmap_items are new: smart_scan skips old
 * ones for up to 8 scans.
 */
static void churn_loop(void)
{
	const long n = 64, span = 1L << 30;
	char *va = mmap(NULL, span, PROT_NONE, ANON | MAP_NORESERVE, -1, 0);
	long i, k, off = 0, scans0 = 0, round;
	int gen0;
	int64_t t0;

	if (va == MAP_FAILED)
		die("mmap");
	for (round = 0; sh->phase == PH_RUN && !sh->hang; round++) {
		ws->op = OP_CHURN;
		for (i = 0; i < 9; i++) {
			if (i) {
				usleep(rnd() % 2000);
				munmap(ar[0].base, n * PAGE);
				ADD(sh->cnt[OP_CHURN], 1);
			}
			off = off + 2 * (n + 1) * PAGE < span ? off + (n + 1) * PAGE : 0;
			ar[0].base = map_area(va + off, n, 0, 1);
			publish();
			for (k = 0; k < n; k++) {
				*rc(0, k) = (struct rec){ getpid() * 1000003ULL + round, 0, NOPATCH,
							  UNIQUE };
				fill(0, k);
			}
			verify_range(0, 0, n, 1);
		}
		sh->churn_wait = t0 = now_ms();
		for (gen0 = -1;; usleep(50000)) {
			beat();
			if (read_long("/proc/self/ksm_merging_pages", NULL) > 0) {
				ADD(sh->cnt[C_CHURN_OK], 1);
				break;
			}
			if (gen0 != sh->run_gen || sh->run_now != 1) {
				gen0 = sh->run_gen;
				scans0 = read_long(KSM "full_scans", NULL);
			} else if (read_long(KSM "full_scans", NULL) - scans0 >= 12) {
				surprise(C_CHURN_FAIL, "churn round %ld: 12 scans, no merge",
					 round);
				break;
			}
			if (now_ms() - t0 > 300000 || sh->phase != PH_RUN || sh->hang) {
				ADD(sh->cnt[C_CHURN_UNKNOWN], 1);
				break;
			}
		}
		sh->churn_wait = 0;
		verify_range(0, 0, n, 1);
		munmap(ar[0].base, n * PAGE);
	}
	ar[0].n = 0;		/* nothing left to verify */
	publish();
}

/* ------------------------------------------------------------------ merge domains (rksm) */

/*
 * rksm's merge_scope promises that no frame is ever mapped by two merge domains through a KSM
 * merge: under memcg, by address spaces of two memory cgroups (-g puts every other pair of
 * workers in a second cgroup); under mm, by two processes. Workers are forked before they map
 * anything, so a KSM frame two of them map was merged by KSM; the zero page (use_zero_pages) is
 * not a KSM page and is mapped by everyone. The controller reads the workers' frames from
 * /proc/PID/pagemap every 15 s and once more after the quiesce's full scans: a KSM frame of two
 * domains that both still map when read again (a frame freed and reused in between is not) is
 * a failure. The bystander is a domain of its own in every scope. -S SCOPE checks as if
 * merge_scope were SCOPE: -S mm must fail under global, where workers share frames.
 */
enum { SC_GLOBAL, SC_MEMCG, SC_MM, SC_NR };
static const char *const scope_name[SC_NR] = { "global", "memcg", "mm" };
static int scope = -1, scope_forced;	/* -S, or what merge_scope reads (global if none) */
static const char *cg2;		/* -g: the second memory cgroup's directory */

/*
 * 6.12 sets it for every anonymous page (stable_page_flags() tests the KSM bits with &): the
 * check below then looks at every frame two workers share, a superset of the KSM ones.
 */
#define KPF_KSM_ 21
#define PM_PFN(e) ((e) >> 63 ? (e) & ((1ULL << 55) - 1) : 0)	/* 0: not present */

struct frame {
	uint64_t pfn;
	uintptr_t va;
	int slot;
};

static void join_cgroup(void)
{
	char path[256], pid[16];
	int fd, n = snprintf(pid, sizeof(pid), "%d", getpid());

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg2);
	fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, pid, n) != n)
		die(path);
	close(fd);
}

static int domain_of(int slot)
{
	if (sh->w[slot].kind == K_BYSTANDER || scope == SC_MM)
		return slot;
	return scope == SC_MEMCG ? MAXW + sh->w[slot].cg : MAXW;
}

static uint64_t u64_at(int fd, uint64_t index)
{
	uint64_t e = 0;

	return pread(fd, &e, 8, index * 8) == 8 ? e : 0;
}

static int by_pfn(const void *x, const void *y)
{
	const struct frame *a = x, *b = y;

	return a->pfn < b->pfn ? -1 : a->pfn > b->pfn;
}

/* Append the present frames of one worker's areas; 0 if they moved while read (then skip it). */
static int worker_frames(int slot, int fd, struct frame **f, long *nf, long *cap)
{
	struct wslot *w = &sh->w[slot];
	int gen = __atomic_load_n(&w->area_gen, __ATOMIC_SEQ_CST), a;
	uint64_t e[512];
	long k, i, n, got;
	uintptr_t base;

	for (a = 0; a < NAREA && !(gen & 1); a++) {
		base = w->base[a];
		n = w->npg[a];
		if (*nf + n > *cap) {
			*cap = (*nf + n) * 2;
			*f = realloc(*f, *cap * sizeof(**f));
			if (!*f)
				exit(2);
		}
		for (k = 0; k < n; k += got) {
			got = n - k < 512 ? n - k : 512;
			if (pread(fd, e, got * 8, (base / PAGE + k) * 8) != got * 8)
				return 0;
			for (i = 0; i < got; i++)
				if (PM_PFN(e[i]))
					(*f)[(*nf)++] = (struct frame){ PM_PFN(e[i]),
									base + (k + i) * PAGE, slot };
		}
	}
	return gen == __atomic_load_n(&w->area_gen, __ATOMIC_SEQ_CST) && !(gen & 1);
}

/* One check of every worker's frames (final: when all is merged, before run=2). */
static void frame_check(int final)
{
	static struct frame *f;
	static long cap;
	int fd[MAXW], flags = open("/proc/kpageflags", O_RDONLY), s;
	long nf = 0, nf0, i, j, k, across = 0;
	char path[64];
	uint64_t pfn;

	if (flags < 0)
		surprise(C_SYS_BAD, "/proc/kpageflags: %s", strerror(errno));
	for (s = 0; s < nslots; s++) {
		snprintf(path, sizeof(path), "/proc/%d/pagemap", sh->w[s].pid);
		fd[s] = sh->w[s].reaped ? -1 : open(path, O_RDONLY);
		nf0 = nf;
		if (fd[s] >= 0 && !worker_frames(s, fd[s], &f, &nf, &cap))
			nf = nf0;	/* its areas moved while read: not this time */
	}
	qsort(f, nf, sizeof(*f), by_pfn);
	for (i = 0; i < nf; i = j) {
		for (j = i + 1; j < nf && f[j].pfn == f[i].pfn; j++)
			;
		for (k = i + 1; k < j && f[k].slot == f[i].slot; k++)
			;
		pfn = f[i].pfn;
		if (k == j || !(u64_at(flags, pfn) >> KPF_KSM_ & 1))
			continue;	/* one worker's, or not a KSM page */
		across++;
		for (k = i + 1; k < j && domain_of(f[k].slot) == domain_of(f[i].slot); k++)
			;
		if (k < j && PM_PFN(u64_at(fd[f[i].slot], f[i].va / PAGE)) == pfn &&
		    PM_PFN(u64_at(fd[f[k].slot], f[k].va / PAGE)) == pfn)
			surprise(C_ACROSS_DOMAINS, "%s: KSM frame %#llx: worker %d %#lx, %d %#lx",
				 scope_name[scope], (unsigned long long)pfn, f[i].slot,
				 (unsigned long)f[i].va, f[k].slot, (unsigned long)f[k].va);
	}
	for (s = 0; s < nslots; s++)
		if (fd[s] >= 0)
			close(fd[s]);
	if (flags >= 0)
		close(flags);
	ADD(sh->cnt[C_FRAME_CHECKS], 1);
	if (final)
		sh->cnt[C_ACROSS_WORKERS] = across;
}

static void wait_phase(int phase, int verify_every_ms)
{
	int64_t last = now_ms();

	for (; sh->phase == phase && !sh->hang; usleep(20000), beat()) {
		if (verify_every_ms && now_ms() - last > verify_every_ms) {
			verify_all();
			last = now_ms();
		}
	}
}

static void worker(int slot)
{
	/* Pages per area: the churner's are a number of pages, the others' an amount of memory. */
	long per = kind == K_CHURN ? 64 : (kind == K_BYSTANDER ? BYSTANDER_MIB : mib) *
		   ((1L << 20) / (long)PAGE) / NAREA, k;
	int64_t start = now_ms(), last_full = start;
	int a, injected = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	rs = mix(seed0 + slot) | 1;
	if (ws->cg)		/* before anything is mapped: its pages are charged there */
		join_cgroup();
	if (kind == K_PRCTL && prctl(PR_SET_MEMORY_MERGE_, 1, 0, 0, 0))
		surprise(C_SYS_BAD, "PR_SET_MEMORY_MERGE: %s", strerror(errno));
	tot = per * NAREA;
	rec = mmap(NULL, tot * sizeof(*rec), RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (rec == MAP_FAILED)
		die("mmap records");
	for (a = 0; a < NAREA; a++) {
		ar[a] = (struct area){ NULL, per, a * per, a == 1 || kind == K_BYSTANDER };
		if (kind == K_CHURN) {	/* churn_loop() maps area 0 itself */
			ar[a].n = a ? 0 : per;
			continue;
		}
		ar[a].base = map_area(NULL, per, ar[a].thp, kind != K_BYSTANDER);
		rewrite(a, 0, per);
	}
	publish();
	beat();
	if (kind == K_BYSTANDER)
		bystander_loop();
	if (kind == K_CHURN)
		churn_loop();
	while (sh->phase == PH_RUN && !sh->hang && kind < K_BYSTANDER) {
		do_op(now_ms() - last_full > 2000 ? OP_FULL : pick_op());
		if (ws->op == OP_FULL)
			last_full = now_ms();
		if (fault_inject && slot == 0 && !injected && now_ms() - start > duration * 333) {
			/* -F: one page's expected record changes: that page must mismatch */
			k = rnd() % per;
			*rc(0, k) = (struct rec){ 0, 0, NOPATCH, rc(0, k)->cls % 15 + 1 };
			fprintf(stderr, "fault injection: record of page %ld of area 0 altered\n",
				k);
			injected = 1;
			do_op(OP_FULL);
		}
		usleep(300 + rnd() % 1500);
	}
	ws->op = OP_FULL;
	wait_phase(PH_QUIESCE, 1000);	/* reads of merged pages while ksmd merges */
	verify_all();
	ws->done = 1;
	wait_phase(PH_VERIFY, 0);
	verify_all();			/* after run=2 unmerged everything */
	beat();
	_exit(ws->mism ? 1 : 0);
}

/* ----------------------------------------------------------------------------- controller */

static struct knob {
	const char *name;
	int flip;		/* the controller sets it (and restores it at the end) */
	int busy;		/* EBUSY is an expected answer (C KSM: while pages are shared) */
	int erange;		/* C KSM answers ERANGE to a number too large (kstrtoint) */
	int present;
	char saved[64];
	int64_t ok, ebusy, bad, slowest_ms;
	long last;		/* the last value the controller wrote with success */
	int set;
} knobs[] = {
	{ "run", 1 }, { "pages_to_scan", 1 }, { "sleep_millisecs", 1 },
	{ "merge_across_nodes", 1, 1, 1 }, { "max_page_sharing", 1, 1, 1 },
	{ "use_zero_pages", 1 }, { "smart_scan", 1 }, { "scan_threads", 1 },
	{ "advisor_mode" }, { "stable_node_chains_prune_millisecs" }, { "advisor_max_cpu" },
	{ "advisor_min_pages_to_scan" }, { "advisor_max_pages_to_scan" },
	{ "advisor_target_scan_time" },
};

#define NKNOB ARRAY_SIZE(knobs)
enum { KN_RUN, KN_PTS, KN_SLEEP, KN_MAN, KN_MPS, KN_ZERO, KN_SMART, KN_THREADS, KN_ADVISOR };
static const char *const bad_values[] = { "x", "-1", "", "99999999999999999999" };
static const long mps_values[] = { 2, 3, 256 };
static int threads_list[16] = { 1, 2, 4 }, nthreads = 3, advisor_on, stop_threads;
static int64_t t_start;
static long cur[4], peak[4], left[2][4];	/* pages_shared, _sharing, ksm_zero, merging */
static long minutes, merged_minutes;	/* of the run proper; those that saw pages_sharing > 0 */
/* rksm's sample_misses at the start (-1 on C KSM, which has no such file) */
static long sample_misses0 = -1;
/* The quiesce's full scans, what it waits for, and how long it took. */
#define QUIET_SCANS 3
static long quiet_scans0, quiet_scans;
static int64_t quiet_ms;

/* Write a string to a knob: 0 or the errno. (Writing "" returns 0: sysfs_kf_write().) */
static int kwrite(const char *knob, const char *val)
{
	char path[128];
	int fd, err = 0;

	snprintf(path, sizeof(path), KSM "%s", knob);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return errno;
	if (write(fd, val, strlen(val)) < 0)
		err = errno;
	close(fd);
	return err;
}

/* A valid write: EBUSY is fine where C KSM gives it, any other error is a surprise. */
static void kset(int k, long v)
{
	char val[32];
	int64_t t0;
	int err;

	if (!knobs[k].present)
		return;
	snprintf(val, sizeof(val), "%ld", v);
	t0 = now_ms();
	err = kwrite(knobs[k].name, val);
	t0 = now_ms() - t0;
	if (t0 > knobs[k].slowest_ms)
		knobs[k].slowest_ms = t0;
	if (!err) {
		ADD(knobs[k].ok, 1);
		knobs[k].last = v;
		knobs[k].set = 1;
	} else if (err == EBUSY && knobs[k].busy) {
		ADD(knobs[k].ebusy, 1);
	} else if (!(err == EINVAL && k == KN_PTS && advisor_on) && ++knobs[k].bad) {
		surprise(C_SYSFS_BAD, "write %s=%s: %s", knobs[k].name, val, strerror(err));
	}
	if (k == KN_RUN && !err)
		sh->run_now = v;
}

static long kread(const char *knob)
{
	char path[128];

	snprintf(path, sizeof(path), KSM "%s", knob);
	return read_long(path, NULL);
}

/*
 * Threads that write invalid values to every knob all the time: only EINVAL (ERANGE where C KSM
 * gives it, 0 for "") is right. The first one also compacts memory every 3 to 7 s, which
 * migrates KSM pages too.
 */
static void *bad_writer(void *arg)
{
	uint64_t r = (uintptr_t)arg * 7919 + 1;
	int64_t next_compact = now_ms() + 3000;
	int k, v, err, fd;

	while (!stop_threads) {
		r = mix(r);
		k = r % NKNOB;
		v = (r >> 16) % 4;
		err = kwrite(knobs[k].name, bad_values[v]);
		ADD(sh->cnt[C_BAD_WRITES], knobs[k].present);
		if (!knobs[k].present)
			continue;
		if ((!err && v == 2) || err == EINVAL ||
		    (err == ERANGE && v == 3 && knobs[k].erange))
			ADD(sh->cnt[C_BAD_OK], 1);
		else
			surprise(C_SYSFS_BAD, "write %s='%s': %s", knobs[k].name, bad_values[v],
				 err ? strerror(err) : "accepted");
		if (kwrite("pages_shared", "1") != EACCES)	/* read-only: open() must fail */
			surprise(C_SYSFS_BAD, "open(pages_shared, O_WRONLY): not EACCES");
		usleep(1000 + (r >> 40) % 4000);
		if (arg || now_ms() < next_compact)
			continue;
		next_compact = now_ms() + 3000 + (r >> 20) % 4000;
		fd = open("/proc/sys/vm/compact_memory", O_WRONLY);
		if (fd >= 0 && write(fd, "1", 1) != 1)
			surprise(C_SYS_BAD, "compact_memory: %s", strerror(errno));
		ADD(sh->cnt[OP_COMPACT], fd >= 0);
		if (fd >= 0)
			close(fd);
	}
	return NULL;
}

/* Restore the knobs we changed (run=2 first: some refuse to change while pages are shared). */
static void restore_knobs(void)
{
	int i;

	kwrite("run", "2");
	for (i = NKNOB - 1; i >= 0; i--)
		if (knobs[i].flip && knobs[i].present && kwrite(knobs[i].name, knobs[i].saved))
			fprintf(stderr, "cannot restore %s\n", knobs[i].name);
}

static void kill_workers(void)
{
	int i;

	for (i = 0; i < nslots; i++)
		if (!sh->w[i].reaped && sh->w[i].pid > 0)
			kill(sh->w[i].pid, SIGKILL);
}

/* Interrupted (SIGINT, or SIGTERM from timeout(1)): leave KSM as it was found. */
static void on_signal(int sig)
{
	kill_workers();
	restore_knobs();
	_exit(128 + sig);
}

static void dump_stack(int pid, const char *label)
{
	char path[300], buf[4096];

	snprintf(path, sizeof(path), "/proc/%d/stack", pid);
	read_file(path, buf, sizeof(buf));
	fprintf(stderr, "--- %s (pid %d) kernel stack:\n%s", label, pid, buf);
}

static int report(void);

/*
 * The watchdog: a worker (or its child) without progress for 60 s, the controller for 240 s, or
 * a run past duration + 300 s, is a hang: show the kernel stacks (ours and ksmd's), kill the
 * workers.
 */
static void *watchdog(void *arg)
{
	char path[300], comm[32];
	struct dirent *d;
	int i, hung = -2;
	DIR *dir;

	while (!sh->finished && hung == -2) {
		sleep(1);
		if (now_ms() - sh->ctl_beat > CTL_HANG_MS ||
		    now_ms() - t_start > (duration + 300) * 1000)
			hung = -1;
		for (i = 0; i < nslots; i++)
			if (!sh->w[i].reaped && now_ms() - sh->w[i].beat > HANG_MS)
				hung = i;
	}
	if (sh->finished)
		return NULL;
	fprintf(stderr, "HANG: %s %d made no progress (in %s)\n",
		hung < 0 ? "controller" : "worker", hung, hung < 0 ? "-" : name[sh->w[hung].op]);
	dump_stack(getpid(), "controller");
	for (i = 0; i < nslots; i++) {
		if (!sh->w[i].reaped)
			dump_stack(sh->w[i].pid, kind_name[sh->w[i].kind]);
		if (!sh->w[i].reaped && sh->w[i].child)
			dump_stack(sh->w[i].child, "its child");
	}
	for (dir = opendir("/proc"); dir && (d = readdir(dir));) {
		snprintf(path, sizeof(path), "/proc/%s/comm", d->d_name);
		if (read_file(path, comm, sizeof(comm)) > 0 && !strncmp(comm, "ksmd", 4))
			dump_stack(atoi(d->d_name), "ksmd");
	}
	if (dir)
		closedir(dir);
	sh->hang = 1;
	kill_workers();
	for (i = 0; i < 30 && !sh->finished; i++)	/* the main thread may be stuck in sysfs */
		sleep(1);
	if (!sh->finished) {
		i = report();
		restore_knobs();
		_exit(i);
	}
	return NULL;
}

/* What KSM holds: pages_shared, pages_sharing, ksm_zero_pages, the workers' merging pages. */
static void ksm_state(long *out, int per_process)
{
	char path[64];
	long m;
	int i;

	out[0] = kread("pages_shared");
	out[1] = kread("pages_sharing");
	out[2] = kread("ksm_zero_pages") > 0 ? kread("ksm_zero_pages") : 0;
	for (out[3] = 0, i = 0; per_process && i < nslots; i++) {
		snprintf(path, sizeof(path), "/proc/%d/ksm_merging_pages", sh->w[i].pid);
		m = sh->w[i].reaped ? 0 : read_long(path, NULL);
		out[3] += m > 0 ? m : 0;
	}
}

/* Collect exited workers (blocking at the end): an exit before the end is a failure. */
static void reap(int block)
{
	struct wslot *w;
	int st;

	for (w = sh->w; w < sh->w + nslots; w++) {
		if (w->reaped || waitpid(w->pid, &st, block ? 0 : WNOHANG) <= 0)
			continue;
		w->reaped = 1;
		w->status = st;
		w->early = sh->phase != PH_UNMERGED;
		if (WIFSIGNALED(st) || WEXITSTATUS(st) > 1 || w->early)
			fprintf(stderr, "worker %d (%s) %s %d%s\n", (int)(w - sh->w),
				kind_name[w->kind], WIFSIGNALED(st) ? "killed by signal" : "exited",
				WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
				w->early ? " before the end" : "");
	}
}

static void knob_action(void)
{
	unsigned int x = rnd() % 100;
	int64_t waited = sh->churn_wait ? now_ms() - sh->churn_wait : 0;

	/*
	 * run=2 forgets every page's checksum, and merging starts again: once a churn round has
	 * waited 20 s for its area to merge, run stays at 1 until the round is decided (on the
	 * KASAN kernels a flip came more often than the two passes a merge needs).
	 */
	if (x < 16 && waited > 20000)
		x = 16 + x * 5;
	if (x < 16) {		/* run=2 (workers migrate meanwhile) or run=0, then run=1 */
		ADD(sh->run_gen, 1);
		sh->unmerging = x < 12;
		kset(KN_RUN, x < 12 ? 2 : 0);
		sh->unmerging = 0;
		if (x < 12 && rnd() % 2)	/* nothing is shared now: should succeed */
			kset(KN_MAN, rnd() % 2);
		if (x < 12 && rnd() % 2)
			kset(KN_MPS, mps_values[rnd() % 3]);
		usleep(rnd() % 300000);
		kset(KN_RUN, 1);
	} else if (x < 26) {
		kset(KN_MAN, rnd() % 2);
	} else if (x < 36) {
		kset(KN_MPS, mps_values[rnd() % 3]);
	} else if (x < 46) {
		kset(KN_ZERO, rnd() % 2);
	} else if (x < 56) {
		kset(KN_SMART, rnd() % 2);
	} else if (x < 66) {
		kset(KN_THREADS, threads_list[rnd() % nthreads]);
	} else if (x < 83) {
		kset(KN_SLEEP, rnd() % 21);
	} else {
		kset(KN_PTS, 100 + rnd() % 4901);
	}
}

/* The workers' totals: operations, pages verified, mismatches. */
static void totals(int64_t *t)
{
	struct wslot *w;

	for (t[0] = t[1] = t[2] = 0, w = sh->w; w < sh->w + nslots; w++) {
		t[0] += w->ops;
		t[1] += w->verified;
		t[2] += w->mism;
	}
}

static void progress(const char *what)
{
	int64_t t[3];

	totals(t);
	if (quiet)
		return;
	fprintf(stderr, "[%4llds] %-8s ops %lld  pages verified %lld  mismatches %lld",
		(long long)(now_ms() - t_start) / 1000, what, (long long)t[0], (long long)t[1],
		(long long)t[2]);
	fprintf(stderr, "  pages_sharing %ld (peak %ld)\n", cur[1], peak[1]);
}

/* Let the workers run for ms: sample KSM's counters, reap, flip knobs if asked, report. */
static void run_for(int64_t ms, int flip, int until_merged)
{
	int64_t end = now_ms() + ms, next_knob = 0, next_line = now_ms() + 10000;
	int64_t next_frames = now_ms() + 15000;
	int n, i, seen = 0;

	for (n = 0; now_ms() < end && !sh->hang; n++, usleep(100000)) {
		if (until_merged && cur[1] > 0 && kread("full_scans") - quiet_scans0 >= QUIET_SCANS)
			break;
		ksm_state(cur, n % 5 == 0);
		for (i = 0; i < 4; i++)
			peak[i] = cur[i] > peak[i] ? cur[i] : peak[i];
		if (flip && (now_ms() - t_start) / 60000 >= minutes) {	/* a minute stalled in a */
			minutes = (now_ms() - t_start) / 60000 + 1;	/* knob write counts unseen */
			seen = 0;
		}
		if (flip && cur[1] > 0 && !seen) {
			merged_minutes++;
			seen = 1;
		}
		sh->ctl_beat = now_ms();
		reap(0);
		if (flip && now_ms() >= next_knob) {
			knob_action();
			next_knob = now_ms() + 300 + rnd() % 1200;
		}
		if (now_ms() >= next_line) {
			progress(flip ? "running" : "merging");
			next_line += 10000;
		}
		if (now_ms() >= next_frames) {
			frame_check(0);
			next_frames = now_ms() + 15000;
		}
	}
}

#define TAP(cond, ...) do {						\
	int ok_ = (cond);						\
									\
	failed += !ok_;							\
	printf("%s %d - ", ok_ ? "ok" : "not ok", ++n);			\
	printf(__VA_ARGS__);						\
	printf("\n");							\
} while (0)

static int report(void)
{
	int64_t *c = sh->cnt, t[3], died = c[C_CHILD_SIG] + c[C_CHILD_BAD];
	int i, n = 0, failed = 0;
	struct wslot *w;

	if (__atomic_exchange_n(&sh->reported, 1, __ATOMIC_RELAXED))
		return 1;
	totals(t);
	for (w = sh->w; w < sh->w + nslots; w++)
		died += w->reaped && (WIFSIGNALED(w->status) || WEXITSTATUS(w->status) > 1 ||
				      w->early);
	printf("KSM torture: %ld s, %d workers x %ld MiB, seed %llu, %d NUMA node(s)\n", duration,
	       nw, mib, (unsigned long long)seed0, nnodes);
	for (i = 0; i < C_NR; i++)
		printf("  %-28s %10lld%s", name[i], (long long)c[i], i % 2 ? "\n" : "  ");
	printf("\n  %-28s %10lld  %-28s %10lld\n  %-28s %10lld  %-28s %10ld\n",
	       "worker operations", (long long)t[0], "pages verified", (long long)t[1],
	       "MISMATCHES", (long long)t[2], "peak pages_sharing", peak[1]);
	printf("  %-28s %10ld  %-28s %10ld\n  %-28s %10ld  %-28s %10lld\n", "peak pages_shared",
	       peak[0], "peak ksm_zero_pages", peak[2], "peak sum ksm_merging_pages", peak[3],
	       "workers/children died", (long long)died);
	/*
	 * rksm: the changes its volatility gate's sample missed and a recheck of the whole page
	 * found (the page may have been merged meanwhile, exactly, and copied again on write).
	 */
	if (sample_misses0 >= 0)
		printf("  %-28s %10ld\n", "sample misses (rksm)",
		       kread("sample_misses") - sample_misses0);
	printf("  %-28s %10ld  %-28s %10lld\n", "full scans while quiesced", quiet_scans,
	       "quiesce ms", (long long)quiet_ms);
	for (w = sh->w; w < sh->w + nslots; w++)
		if (w->kind == K_BYSTANDER)
			printf("  %-28s %ld -> %ld kB\n", "bystander AnonHugePages", w->thp_kb[0],
			       w->thp_kb[1]);
	printf("  %-28s %10s %10s %10s %12s\n", "knob writes", "ok", "EBUSY", "other",
	       "slowest ms");
	for (i = 0; i < NKNOB; i++)
		if (knobs[i].flip && knobs[i].present)
			printf("  %-28s %10lld %10lld %10lld %12lld\n", knobs[i].name,
			       (long long)knobs[i].ok, (long long)knobs[i].ebusy,
			       (long long)knobs[i].bad, (long long)knobs[i].slowest_ms);
	printf("  after run=2 (shared sharing zero merging): workers alive %ld %ld %ld %ld",
	       left[0][0], left[0][1], left[0][2], left[0][3]);
	printf(", workers gone %ld %ld %ld\n", left[1][0], left[1][1], left[1][2]);
	printf("  merge scope %s%s, second cgroup %s\n", scope_name[scope],
	       scope_forced ? " (-S)" : "", cg2 ? cg2 : "none");
	for (i = 0; i < sh->nmsg && i < NMSG; i++)
		printf("  note: %s\n", sh->msg[i]);
	for (w = sh->w; w < sh->w + nslots; w++)
		if (w->have_first)
			printf("first mismatch: %s\n", w->first);
	printf("1..10\n");
	TAP(t[2] == 0, "no mismatches (%lld)", (long long)t[2]);
	/* Short runs on KASAN kernels may take their first minutes to merge. */
	TAP(peak[1] > 0 && (duration < 600 || merged_minutes * 2 >= minutes),
	    "merging seen throughout (peak pages_sharing %ld; in %ld of %ld minutes)", peak[1],
	    merged_minutes, minutes);
	TAP(died == 0, "no worker died by a signal or failed (%lld)", (long long)died);
	TAP(!sh->hang, "no hang");
	TAP(sh->finished && !left[0][0] && !left[0][1] && !left[0][2] && !left[0][3] &&
	    !left[1][0] && !left[1][1] && !left[1][2], "no KSM pages left after run=2");
	TAP(c[C_SYSFS_BAD] == 0, "sysfs errnos and final values as expected");
	TAP(c[C_SYS_BAD] == 0, "syscall errnos as expected");
	/*
	 * A round is inconclusive when it neither merged nor saw 12 full scans in 300 s (short
	 * runs on KASAN kernels); from 10 minutes on, some round must merge.
	 */
	TAP(c[C_CHURN_FAIL] == 0 && (c[C_CHURN_OK] > 0 || duration < 600),
	    "re-registered areas merge (%lld rounds, %lld inconclusive)", (long long)c[C_CHURN_OK],
	    (long long)c[C_CHURN_UNKNOWN]);
	TAP(c[C_BYSTANDER_KSM] == 0, "bystander never seen by KSM");
	TAP(c[C_ACROSS_DOMAINS] == 0 && c[C_FRAME_CHECKS] > 0,
	    "no KSM frame in two merge domains (%s: %lld checks, %lld across, %lld in two workers)",
	    scope_name[scope], (long long)c[C_FRAME_CHECKS], (long long)c[C_ACROSS_DOMAINS],
	    (long long)c[C_ACROSS_WORKERS]);
	printf("torture: %d passed, %d failed\n", n - failed, failed);
	fflush(stdout);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	char *s, buf[128];
	pthread_t th[4];
	long hpage;
	int c, i;

	PAGE = sysconf(_SC_PAGESIZE);
	hpage = read_long(HPAGE_PMD_SIZE, NULL);
	HPAGE = hpage > 0 ? hpage : PAGE;
	seed0 = time(NULL);
	while ((c = getopt(argc, argv, "d:w:m:t:s:qFg:S:")) != -1) {
		if (c == 'd')
			duration = atol(optarg);
		else if (c == 'w')
			nw = atoi(optarg);
		else if (c == 'm')
			mib = atol(optarg);
		else if (c == 's')
			seed0 = strtoull(optarg, NULL, 0);
		else if (c == 'q' || c == 'F')
			*(c == 'q' ? &quiet : &fault_inject) = 1;
		else if (c == 'g')
			cg2 = optarg;
		else if (c == 'S')
			for (scope = 0, scope_forced = 1; scope < SC_NR &&
			     strcmp(optarg, scope_name[scope]); scope++)
				;
		else if (c == 't')
			for (nthreads = 0, s = strtok(optarg, ","); s && nthreads < 16;
			     s = strtok(NULL, ","))
				threads_list[nthreads++] = atoi(s);
		else
			nw = -1;
	}
	if (nw < 1 || nw > MAXW - 2 || mib < 1 || duration < 1 || !nthreads || scope == SC_NR) {
		fputs("usage: torture [-d SEC] [-w N] [-m MIB] [-t 1,2] [-s SEED] [-q] [-F] [-g DIR] [-S SCOPE]\n",
		      stderr);
		return 2;
	}
	if (access(KSM "run", W_OK)) {
		printf("1..0 # SKIP no writable " KSM "run\n");
		return 0;
	}
	sh = mmap(NULL, sizeof(*sh), RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 2;
	rs = mix(seed0) | 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* NUMA nodes online: "0", or "0-1", "0,1"...: the first two */
	if (read_file("/sys/devices/system/node/online", buf, sizeof(buf)) > 0) {
		s = strpbrk(buf, "-,");
		nodes[0] = atoi(buf);
		nodes[1] = s ? atoi(s + 1) : nodes[0];
	}
	nnodes = nodes[1] != nodes[0] ? 2 : 1;
	sample_misses0 = kread("sample_misses");
	/* merge_scope reads "[global] memcg mm": the one in brackets is in use */
	for (i = 0; scope < 0 && i < SC_NR; i++) {
		snprintf(buf, sizeof(buf), "[%s]", scope_name[i]);
		if (read_file(KSM "merge_scope", buf + 64, 64) > 0 && strstr(buf + 64, buf))
			scope = i;
	}
	scope = scope < 0 ? SC_GLOBAL : scope;

	/* Save the knobs; start from an unmerged state with fast scanning. */
	for (i = 0; i < NKNOB; i++) {
		snprintf(buf, sizeof(buf), KSM "%s", knobs[i].name);
		knobs[i].present = read_file(buf, knobs[i].saved, sizeof(knobs[i].saved)) > 0;
	}
	advisor_on = knobs[KN_ADVISOR].present && !strstr(knobs[KN_ADVISOR].saved, "[none]");
	kset(KN_RUN, 2);
	kset(KN_MPS, 256);
	kset(KN_SLEEP, 0);
	kset(KN_PTS, 1000);
	kset(KN_RUN, 1);

	t_start = now_ms();
	sh->ctl_beat = t_start;
	nslots = nw + 2;
	for (i = 0; i < nslots; i++) {
		sh->w[i].kind = i < nw ? i % 2 : i == nw ? K_BYSTANDER : K_CHURN;
		sh->w[i].cg = cg2 && i / 2 % 2;	/* both kinds in each cgroup */
		sh->w[i].beat = t_start;
		c = fork();
		if (c < 0)
			return 2;
		if (c == 0) {
			ws = &sh->w[i];
			kind = ws->kind;
			worker(i);
		}
		sh->w[i].pid = c;	/* (not in the child: its 0 could land after the pid) */
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	pthread_create(&th[0], NULL, watchdog, NULL);
	for (i = 1; i < 4; i++)
		pthread_create(&th[i], NULL, bad_writer, (void *)(uintptr_t)(i - 1));

	/* The run proper: operations in the workers, knob flips here. */
	run_for(duration * 1000, 1, 0);

	/*
	 * Quiesce: no more writes; fast scanning without smart scan's skips until QUIET_SCANS full
	 * scans have passed over the still pages and something is merged (120 s at most). The
	 * first of them finds the checksums that changed in the run, the second merges every pair
	 * of pages whose checksum held: the final frame check then sees all that can merge.
	 */
	sh->phase = PH_QUIESCE;
	kset(KN_RUN, 1);
	kset(KN_SLEEP, 0);
	kset(KN_PTS, 2000);
	kset(KN_SMART, 0);
	quiet_ms = now_ms();
	quiet_scans0 = kread("full_scans");
	run_for(120000, 0, 1);
	quiet_ms = now_ms() - quiet_ms;
	quiet_scans = kread("full_scans") - quiet_scans0;
	progress("quiesced");

	/* A last check of every page in every worker; then run=2 must unmerge all they have. */
	sh->phase = PH_VERIFY;
	for (;;) {
		for (i = 0; i < nslots && (sh->w[i].reaped || sh->w[i].done); i++)
			;
		if (i == nslots || sh->hang)
			break;
		sh->ctl_beat = now_ms();
		reap(0);
		usleep(20000);
	}
	frame_check(1);
	stop_threads = 1;
	if (!sh->hang) {
		ADD(sh->run_gen, 1);
		kset(KN_RUN, 2);
		ksm_state(left[0], 1);
	}
	sh->ctl_beat = now_ms();
	sh->phase = PH_UNMERGED;	/* workers check every page again, and exit */
	reap(1);
	for (i = 1; i < 4; i++)
		pthread_join(th[i], NULL);
	kset(KN_RUN, 2);		/* and nothing is left of the exited processes */
	ksm_state(left[1], 0);
	/*
	 * The bad writers changed nothing: every knob reads the controller's last value (but
	 * pages_to_scan, which the scan-time advisor sets).
	 */
	for (i = 0; i < NKNOB; i++)
		if (knobs[i].set && !(i == KN_PTS && advisor_on) &&
		    kread(knobs[i].name) != knobs[i].last)
			surprise(C_SYSFS_BAD, "%s reads %ld, last written %ld", knobs[i].name,
				 kread(knobs[i].name), knobs[i].last);

	restore_knobs();
	sh->finished = !sh->hang;
	c = report();
	sh->finished = 1;
	return c;
}
