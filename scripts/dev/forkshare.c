// SPDX-License-Identifier: GPL-2.0
/*
 * dev (not run by make test): a page shared by fork(), merged by the child's KSM, then moved by
 * the parent. The parent fills 64 equal pages and forks; the child sets PR_SET_MEMORY_MERGE
 * (MERGE=1 in the environment; without it the child only waits, the control), waits for its
 * pages to merge and exits; the parent then moves its 64 pages to the other node with
 * move_pages(2) and prints how many did not move. On the test kernels at 2a33907 (C and rksm,
 * TCG, 3 runs each) move_pages() returned 1 after every merge and 0 in the control: one page
 * the parent maps could not be migrated, page 1 on both kernels (presumably the one merged in place). Build: gcc -O2 -static -Wall -o forkshare forkshare.c
 * Run: KSM=c|rust CMD="MERGE=1 build/dev/forkshare" scripts/vm.sh
 */
#define _GNU_SOURCE
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sys/syscall.h>

#define N 64
#ifndef PR_SET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67
#endif
static long rd(const char *p) { FILE *f = fopen(p, "r"); long v = -1; if (f) { if (fscanf(f, "%ld", &v) != 1) v = -1; fclose(f); } return v; }
static void wr(const char *p, const char *s) { FILE *f = fopen(p, "w"); if (f) { fputs(s, f); fclose(f); } }

int main(void)
{
	long ps = getpagesize();
	char *a = mmap(NULL, N * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int st;
	memset(a, 'x', N * ps);
	wr("/sys/kernel/mm/ksm/sleep_millisecs", "0");
	wr("/sys/kernel/mm/ksm/pages_to_scan", "1000");
	wr("/sys/kernel/mm/ksm/run", "1");
	pid_t c = fork();
	if (!c) {
		char path[64];
		if (getenv("MERGE")) prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0); else { usleep(300000); }
		snprintf(path, sizeof(path), "/proc/%d/ksm_merging_pages", getpid());
		for (int i = 0; i < 300 && rd(path) < N; i++)
			usleep(100000);
		printf("child: %ld pages merged, pages_shared %ld\n", rd(path), rd("/sys/kernel/mm/ksm/pages_shared")); fflush(stdout);
		_exit(0);
	}
	waitpid(c, &st, 0);
	sleep(1);
	printf("after child exit: pages_shared %ld pages_sharing %ld\n", rd("/sys/kernel/mm/ksm/pages_shared"), rd("/sys/kernel/mm/ksm/pages_sharing"));
	void *pages[N]; int nodes[N], status[N], where[N];
	for (int i = 0; i < N; i++) pages[i] = a + i * ps;
	syscall(SYS_move_pages, 0, N, pages, NULL, where, 0);
	for (int i = 0; i < N; i++) nodes[i] = where[i] == 0 ? 1 : 0;
	long r = syscall(SYS_move_pages, 0, N, pages, nodes, status, MPOL_MF_MOVE);
	int bad = 0;
	for (int i = 0; i < N; i++) if (status[i] != nodes[i]) { if (bad < 5) printf("page %d: status %d (wanted node %d, was %d)\n", i, status[i], nodes[i], where[i]); bad++; }
	printf("move_pages returned %ld (%m), %d of %d pages not moved\n", r, bad, N);
	/* Where each page is now: the ones still on their old node. */
	syscall(SYS_move_pages, 0, N, pages, NULL, status, 0);
	for (int i = 0; i < N; i++)
		if (status[i] != nodes[i])
			printf("page %d is still on node %d\n", i, status[i]);
	for (int i = 0; i < N * ps; i++) if (a[i] != 'x') { printf("byte %d wrong\n", i); return 1; }
	printf("bytes ok\n");
	return bad ? 1 : 0;
}
