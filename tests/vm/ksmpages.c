// SPDX-License-Identifier: GPL-2.0
/*
 * ksmpages: the workloads of Andrea Arcangeli's ksmpages.c (LKML, 2009), re-created for the
 * madvise() API, plus PageONE's zero-prefix variant.
 *
 * Maps SIZE MiB of anonymous memory, marks it MADV_MERGEABLE, fills it, prints "ready <pages>
 * <address>" and then
 * obeys one-word commands on stdin, answering one line each:
 *
 *   verify     check every byte against the pattern ("ok <pages>" or "bad <page> <offset>")
 *   write N    write a private marker into page N ("ok")
 *   unmerge    madvise(MADV_UNMERGEABLE) on the whole area ("ok" or "bad <errno>")
 *   quit       exit
 *
 * Patterns (one value per page index i, equal in every process so that pages merge across them):
 *   best    every byte of every page is 0x5a
 *   worst   zero but the last 8 bytes, which hold i + 1
 *   prefix  128 zero bytes, then a pseudo-random stream seeded by i
 *   random  a pseudo-random stream seeded by i and the process id (nothing merges)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096UL
#define PREFIX 128

enum mode { BEST, WORST, PREFIX_MODE, RANDOM };

static enum mode mode;
static uint64_t salt;

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

	switch (mode) {
	case BEST:
		memset(p, 0x5a, PAGE);
		break;
	case WORST:
		memset(p, 0, PAGE - 8);
		p[words - 1] = i + 1;
		break;
	case PREFIX_MODE:
	case RANDOM:
		w = mode == PREFIX_MODE ? PREFIX / 8 : 0;
		memset(p, 0, w * 8);
		for (; w < words; w++)
			p[w] = next(&s);
		break;
	}
}

int main(int argc, char **argv)
{
	unsigned long mib = 64, pages, i, marked_page = ~0UL;
	char line[128], *mem;
	uint64_t buf[PAGE / 8];
	int opt;

	while ((opt = getopt(argc, argv, "m:s:")) != -1) {
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
			else
				goto usage;
			break;
		case 's':
			mib = strtoul(optarg, NULL, 0);
			break;
		default:
			goto usage;
		}
	}
	if (mode == RANDOM)
		salt = (uint64_t)getpid() << 32;
	pages = mib * 1024 * 1024 / PAGE;
	mem = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	if (madvise(mem, pages * PAGE, MADV_MERGEABLE)) {
		perror("madvise(MADV_MERGEABLE)");
		return 1;
	}
	for (i = 0; i < pages; i++)
		fill((uint64_t *)(mem + i * PAGE), i);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready %lu %p\n", pages, mem);

	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "verify", 6)) {
			for (i = 0; i < pages; i++) {
				unsigned long off;

				fill(buf, i);
				if (i == marked_page)
					buf[0] ^= 0xfeedULL;
				if (!memcmp(buf, mem + i * PAGE, PAGE))
					continue;
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
		} else if (!strncmp(line, "unmerge", 7)) {
			if (madvise(mem, pages * PAGE, MADV_UNMERGEABLE))
				printf("bad %d\n", errno);
			else
				printf("ok\n");
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
	fprintf(stderr, "usage: %s [-m best|worst|prefix|random] [-s MiB]\n", argv[0]);
	return 2;
}
