// SPDX-License-Identifier: GPL-2.0
/*
 * ksmpages: the workloads of Andrea Arcangeli's ksmpages.c (LKML, 2009), re-created for the
 * madvise() API, plus PageONE's zero-prefix variant.
 *
 * Maps SIZE MiB of anonymous memory, marks it MADV_MERGEABLE (and with -t MADV_HUGEPAGE, at a
 * boundary of the kernel's PMD-sized huge page, so that transparent huge pages back it), fills
 * it, prints "ready <pages> <address>" (pages of the kernel's page size) and then
 * obeys one-word commands on stdin, answering one line each:
 *
 *   verify     check every byte against the pattern ("ok <pages>", "bad <page> <offset>", or
 *              "bad <page> sigbus"), skipping the pages given up by "poison" and "lost"
 *   write N    write a private marker into page N ("ok")
 *   scribble N write a value of this process's own into page N, which verify skips from then on
 *              ("ok")
 *   unmerge    madvise(MADV_UNMERGEABLE) on the whole area ("ok" or "bad <errno>")
 *   pageout    madvise(MADV_PAGEOUT) on the whole area ("ok" or "bad <errno>")
 *   migrate N  move_pages() every page to NUMA node N, shared pages too (MPOL_MF_MOVE_ALL):
 *              "ok <pages on N> <pages not moved> <lowest status>" or "bad <errno>"
 *   nodes      where the pages are: "nodes <on node 0> <on node 1> <elsewhere or absent>"
 *   poison N   madvise(MADV_HWPOISON) on page N, which verify skips from then on
 *              ("ok" or "bad <errno>")
 *   offline N  madvise(MADV_SOFT_OFFLINE) on page N ("ok" or "bad <errno>")
 *   lost N     page N was poisoned elsewhere: verify skips it ("ok")
 *   touch N    read page N: "ok" or "sigbus" if the read faults with SIGBUS
 *   sigbus     the SIGBUS signals that came outside "touch" since the last ask:
 *              "sigbus <count> <si_code of the last>"
 *   quit       exit
 *
 * Patterns (one value per page index i, equal in every process so that pages merge across them):
 *   best    every byte of every page is 0x5a
 *   worst   zero but the last 8 bytes, which hold i + 1
 *   prefix  128 zero bytes, then a pseudo-random stream seeded by i
 *   random  a pseudo-random stream seeded by i and the process id (nothing merges)
 *   chains  one page in four a copy of one of 64 contents (pseudo-random streams, equal in every
 *           process), the others random as in "random": few contents with many copies, which
 *           fill stable nodes up to max_page_sharing and make chains of them
 *   copies  as chains with as many contents as give each four copies: many contents with few
 *           copies each
 *   zeros   every byte zero (written, so each page is a page of its own until KSM merges it,
 *           with use_zero_pages, into the zero page)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PREFIX 128
#define HPAGE_PMD_SIZE "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size"

/* The kernel's page size, set first thing in main(). */
static unsigned long PAGE;

enum mode { BEST, WORST, PREFIX_MODE, RANDOM, CHAINS, COPIES, ZEROS };

static enum mode mode;
static uint64_t salt;
/* How many contents the copies of "chains" and "copies" hold. */
static unsigned long contents = 64;

static uint64_t next(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void fill(uint64_t *p, unsigned long i)
{
	unsigned long w, words = PAGE / 8;
	uint64_t s = i * 0x100000001b3ULL + salt;

	/* A copy is seeded by which content it is, not by i or the process. */
	if ((mode == CHAINS || mode == COPIES) && i % 4 == 0)
		s = (i / 4 % contents + 1) * 0x9e3779b97f4a7c15ULL;

	switch (mode) {
	case BEST:
		memset(p, 0x5a, PAGE);
		break;
	case ZEROS:
		memset(p, 0, PAGE);
		break;
	case WORST:
		memset(p, 0, PAGE - 8);
		p[words - 1] = i + 1;
		break;
	case CHAINS:
	case COPIES:
	case PREFIX_MODE:
	case RANDOM:
		w = mode == PREFIX_MODE ? PREFIX / 8 : 0;
		memset(p, 0, w * 8);
		for (; w < words; w++)
			p[w] = next(&s);
		break;
	}
}

static sigjmp_buf touch_jmp;
static volatile sig_atomic_t touching, async_sigbus, async_code;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	if (touching)
		siglongjmp(touch_jmp, 1);
	async_sigbus++;
	async_code = si->si_code;
}

#define MPOL_MF_MOVE_ALL (1 << 2)
#ifndef MADV_SOFT_OFFLINE
#define MADV_SOFT_OFFLINE 101
#endif

static long move_pages(unsigned long count, void **addrs, const int *nodes, int *status,
		       int flags)
{
	return syscall(SYS_move_pages, 0, count, addrs, nodes, status, flags);
}

/*
 * move_pages() for every page of the area; node -1 asks where they are. Returns how many pages
 * could not be moved, or -errno.
 */
static long all_pages(char *mem, unsigned long pages, int node, int *status)
{
	void **addrs = calloc(pages, sizeof(*addrs));
	int *nodes = calloc(pages, sizeof(*nodes));
	unsigned long i;
	long ret;

	if (!addrs || !nodes)
		return -ENOMEM;
	for (i = 0; i < pages; i++) {
		addrs[i] = mem + i * PAGE;
		nodes[i] = node;
	}
	ret = move_pages(pages, addrs, node < 0 ? NULL : nodes, status,
			 node < 0 ? 0 : MPOL_MF_MOVE_ALL);
	free(addrs);
	free(nodes);
	return ret < 0 ? -errno : ret;
}

/* The size of a PMD-mapped transparent huge page, or 0 where the kernel has none. */
static unsigned long hpage_size(void)
{
	FILE *f = fopen(HPAGE_PMD_SIZE, "r");
	unsigned long size = 0;

	if (f) {
		if (fscanf(f, "%lu", &size) != 1)
			size = 0;
		fclose(f);
	}
	return size;
}

static int page_arg(const char *arg, unsigned long pages, unsigned long *i)
{
	*i = strtoul(arg, NULL, 0);
	if (*i >= pages) {
		printf("bad page\n");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long mib = 64, pages, i, marked_page = ~0UL, align = 0;
	/* SA_RESTART: a SIGBUS sent by memory failure must not cut a read of stdin short. */
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_RESTART };
	char line[128], *mem;
	int opt, thp = 0, *status;
	uint64_t *buf;
	char *lost;

	PAGE = sysconf(_SC_PAGESIZE);
	while ((opt = getopt(argc, argv, "m:s:t")) != -1) {
		switch (opt) {
		case 'm':
			if (!strcmp(optarg, "best"))
				mode = BEST;
			else if (!strcmp(optarg, "worst"))
				mode = WORST;
			else if (!strcmp(optarg, "prefix"))
				mode = PREFIX_MODE;
			else if (!strcmp(optarg, "random"))
				mode = RANDOM;
			else if (!strcmp(optarg, "chains"))
				mode = CHAINS;
			else if (!strcmp(optarg, "copies"))
				mode = COPIES;
			else if (!strcmp(optarg, "zeros"))
				mode = ZEROS;
			else
				goto usage;
			break;
		case 's':
			mib = strtoul(optarg, NULL, 0);
			break;
		case 't':
			thp = 1;
			break;
		default:
			goto usage;
		}
	}
	if (mode == RANDOM || mode == CHAINS || mode == COPIES)
		salt = (uint64_t)getpid() << 32;
	pages = mib * 1024 * 1024 / PAGE;
	if (mode == COPIES && pages >= 16)
		contents = pages / 16;
	status = calloc(pages, sizeof(*status));
	lost = calloc(pages, 1);
	buf = malloc(PAGE);
	/*
	 * With -t, a huge page more, to start the area at a huge page's boundary (without
	 * transparent huge pages, MADV_HUGEPAGE below fails).
	 */
	if (thp) {
		align = hpage_size();
		align = align ? align : PAGE;
	}
	mem = mmap(NULL, pages * PAGE + align, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED || !status || !lost || !buf) {
		perror("mmap");
		return 1;
	}
	if (thp) {
		mem = (char *)(((uintptr_t)mem + align - 1) & ~(uintptr_t)(align - 1));
		if (madvise(mem, pages * PAGE, MADV_HUGEPAGE)) {
			perror("madvise(MADV_HUGEPAGE)");
			return 1;
		}
	}
	if (madvise(mem, pages * PAGE, MADV_MERGEABLE)) {
		perror("madvise(MADV_MERGEABLE)");
		return 1;
	}
	sigaction(SIGBUS, &sa, NULL);
	for (i = 0; i < pages; i++)
		fill((uint64_t *)(mem + i * PAGE), i);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready %lu %p\n", pages, mem);

	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "verify", 6)) {
			for (i = 0; i < pages; i++) {
				unsigned long off;

				if (lost[i])
					continue;
				if (sigsetjmp(touch_jmp, 1)) {
					touching = 0;
					printf("bad %lu sigbus\n", i);
					goto next;
				}
				touching = 1;
				fill(buf, i);
				if (i == marked_page)
					buf[0] ^= 0xfeedULL;
				if (!memcmp(buf, mem + i * PAGE, PAGE)) {
					touching = 0;
					continue;
				}
				touching = 0;
				for (off = 0; off < PAGE; off++)
					if (((char *)buf)[off] != mem[i * PAGE + off])
						break;
				printf("bad %lu %lu\n", i, off);
				goto next;
			}
			printf("ok %lu\n", pages);
		} else if (!strncmp(line, "write ", 6)) {
			i = strtoul(line + 6, NULL, 0);
			if (i >= pages || marked_page != ~0UL) {
				printf("bad write\n");
				continue;
			}
			((uint64_t *)(mem + i * PAGE))[0] ^= 0xfeedULL;
			marked_page = i;
			printf("ok\n");
		} else if (!strncmp(line, "scribble ", 9)) {
			if (page_arg(line + 9, pages, &i))
				continue;
			((uint64_t *)(mem + i * PAGE))[0] ^= 0x5c0000000000ULL | (uint64_t)getpid();
			lost[i] = 1;
			printf("ok\n");
		} else if (!strncmp(line, "unmerge", 7)) {
			if (madvise(mem, pages * PAGE, MADV_UNMERGEABLE))
				printf("bad %d\n", errno);
			else
				printf("ok\n");
		} else if (!strncmp(line, "pageout", 7)) {
			if (madvise(mem, pages * PAGE, MADV_PAGEOUT))
				printf("bad %d\n", errno);
			else
				printf("ok\n");
		} else if (!strncmp(line, "migrate ", 8)) {
			int node = atoi(line + 8), worst = 0;
			long failed = all_pages(mem, pages, node, status);
			unsigned long on = 0;

			if (failed < 0) {
				printf("bad %ld\n", -failed);
				continue;
			}
			for (i = 0; i < pages; i++) {
				on += status[i] == node;
				if (status[i] < worst)
					worst = status[i];
			}
			printf("ok %lu %ld %d\n", on, failed, worst);
		} else if (!strncmp(line, "nodes", 5)) {
			unsigned long n[3] = { 0, 0, 0 };
			long err = all_pages(mem, pages, -1, status);

			if (err) {
				printf("bad %ld\n", -err);
				continue;
			}
			for (i = 0; i < pages; i++)
				n[status[i] == 0 ? 0 : status[i] == 1 ? 1 : 2]++;
			printf("nodes %lu %lu %lu\n", n[0], n[1], n[2]);
		} else if (!strncmp(line, "poison ", 7) || !strncmp(line, "offline ", 8)) {
			int soft = line[0] == 'o';

			if (page_arg(line + (soft ? 8 : 7), pages, &i))
				continue;
			if (!soft)
				lost[i] = 1;
			if (madvise(mem + i * PAGE, PAGE, soft ? MADV_SOFT_OFFLINE : MADV_HWPOISON))
				printf("bad %d\n", errno);
			else
				printf("ok\n");
		} else if (!strncmp(line, "lost ", 5)) {
			if (page_arg(line + 5, pages, &i))
				continue;
			lost[i] = 1;
			printf("ok\n");
		} else if (!strncmp(line, "touch ", 6)) {
			if (page_arg(line + 6, pages, &i))
				continue;
			if (sigsetjmp(touch_jmp, 1)) {
				touching = 0;
				printf("sigbus\n");
				continue;
			}
			touching = 1;
			*(volatile char *)(mem + i * PAGE);
			touching = 0;
			printf("ok\n");
		} else if (!strncmp(line, "sigbus", 6)) {
			printf("sigbus %d %d\n", (int)async_sigbus, (int)async_code);
			async_sigbus = 0;
			async_code = 0;
		} else if (strncmp(line, "quit", 4)) {
			printf("bad command\n");
		} else {
			break;
		}
next:
		;
	}
	return 0;
usage:
	fprintf(stderr, "usage: %s [-m best|worst|prefix|random|chains|copies|zeros] [-s MiB] [-t]\n",
		argv[0]);
	return 2;
}
