// SPDX-License-Identifier: GPL-2.0
/*
 * ksmspy: the KSM write-timing side channel, for tests/vm/sidechannel.py.
 *
 *   ksmspy victim N HELD  maps N pages; where HELD (a string of N '0' and '1') has a 1, page i
 *                         gets the contents page i of the attacker has, the others all one
 *                         contents of its own (which merge with each other in any scope: the
 *                         positive control)
 *   ksmspy attacker N     maps N pages, page i filled with contents i (each distinct)
 *
 * The caller picks HELD at random: were the victim's pages picked by a pattern (every other
 * one), anything else that follows the pattern (how frames were handed out, say) would pass
 * for the channel.
 *
 * Both mark their pages MADV_MERGEABLE (and not huge), print "ready", and obey commands on
 * stdin: "probe" (attacker) writes one byte into every page, timing each write, and prints
 * "times t0 t1 ..." in nanoseconds, then "faults f0 f1 ...", the page faults each write took
 * (getrusage's minor and major faults, read outside the timed write): a page merged with another
 * process's page takes a copy-on-write fault, one that is not takes none. "quit" exits.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* The kernel's page size, set first thing in main(). */
static unsigned long PAGE;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static long faults_so_far(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt + ru.ru_majflt;
}

/* Contents `i`: words of a stream seeded by i and `salt`, never all zero. */
static void fill(unsigned char *p, unsigned long i, unsigned long salt)
{
	uint64_t s = (i + 1) * 0x9e3779b97f4a7c15ULL ^ salt;
	uint64_t *w = (uint64_t *)p;
	unsigned long k;

	for (k = 0; k < PAGE / 8; k++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		w[k] = s | 1;
	}
}

int main(int argc, char **argv)
{
	const char *held = NULL;
	unsigned long n = 0, i;
	unsigned char *mem;
	long *faults;
	char line[64];
	int victim;

	PAGE = sysconf(_SC_PAGESIZE);
	victim = argc == 4 && !strcmp(argv[1], "victim");
	if (victim || (argc == 3 && !strcmp(argv[1], "attacker")))
		n = strtoul(argv[2], NULL, 0);
	if (victim)
		held = argv[3];
	if (!n || (victim && (strlen(held) != n || strspn(held, "01") != n))) {
		fprintf(stderr, "usage: %s victim PAGES HELD | attacker PAGES\n", argv[0]);
		return 2;
	}
	mem = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	faults = calloc(n, sizeof(*faults));
	if (mem == MAP_FAILED || !faults) {
		perror(mem == MAP_FAILED ? "mmap" : "calloc");
		return 1;
	}
	madvise(mem, n * PAGE, MADV_NOHUGEPAGE);
	for (i = 0; i < n; i++) {
		if (victim && held[i] != '1')
			fill(mem + i * PAGE, 1, 0x5eed);
		else
			fill(mem + i * PAGE, i, 0);
	}
	if (madvise(mem, n * PAGE, MADV_MERGEABLE)) {
		perror("madvise");
		return 1;
	}
	printf("ready %lu\n", n);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "quit", 4))
			break;
		if (!strncmp(line, "probe", 5) && !victim) {
			/* The clock's and getrusage's first calls may fault: not in page 0's count. */
			now_ns();
			faults_so_far();
			printf("times");
			for (i = 0; i < n; i++) {
				long f = faults_so_far();
				uint64_t t = now_ns();

				*(volatile unsigned char *)(mem + i * PAGE) ^= 0x80;
				t = now_ns() - t;
				faults[i] = faults_so_far() - f;
				printf(" %llu", (unsigned long long)t);
			}
			printf("\nfaults");
			for (i = 0; i < n; i++)
				printf(" %ld", faults[i]);
			printf("\n");
		} else {
			printf("bad command\n");
		}
		fflush(stdout);
	}
	return 0;
}
