// SPDX-License-Identifier: GPL-2.0
/*
 * prctl_fork_exec: PR_SET_MEMORY_MERGE survives fork(), and fork() then execve(), and the child's
 * own pages merge. This is what test_prctl_fork and test_prctl_fork_exec of 6.12's
 * ksm_functional_tests mean to check. test_prctl_fork's child reads /proc/self/ksm_merging_pages
 * through a descriptor its parent opened, so it counts the parent's merged pages, not its own;
 * test_prctl_fork_exec gives execv() an argv without its NULL terminator, so execve() fails with
 * EFAULT there and the child goes on running the parent's remaining tests instead.
 *
 * Prints TAP. Needs root (it drives /sys/kernel/mm/ksm).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

#ifndef PR_SET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67
#define PR_GET_MEMORY_MERGE 68
#endif

/* An amount of memory, not a huge page: pages of equal contents, many at any page size. */
#define SIZE (2UL << 20)

/*
 * The forked or exec'd child: merging is on, and its own equal pages merge (counted through
 * /proc/self, opened here). Exit status says what failed.
 */
static int child(void)
{
	long scans;
	char *map;

	if (prctl(PR_GET_MEMORY_MERGE, 0, 0, 0, 0) != 1)
		return 2;
	map = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		return 3;
	memset(map, 0xcf, SIZE);
	if (write_str("/sys/kernel/mm/ksm/pages_to_scan", "10000") ||
	    write_str("/sys/kernel/mm/ksm/sleep_millisecs", "0") ||
	    write_str("/sys/kernel/mm/ksm/run", "1"))
		return 4;
	/* Two full scans: the first puts the pages in the unstable tree, the second merges. */
	scans = read_long("/sys/kernel/mm/ksm/full_scans");
	for (int i = 0; i < 6000 && read_long("/sys/kernel/mm/ksm/full_scans") < scans + 2; i++)
		usleep(10000);
	if (read_long("/proc/self/ksm_merging_pages") <= 0)
		return 5;
	return 0;
}

int main(int argc, char **argv)
{
	char *args[3];
	int status;
	pid_t pid;

	if (argc > 1 && !strcmp(argv[1], "child"))
		return child();
	args[0] = argv[0];
	args[1] = "child";
	args[2] = NULL;

	printf("TAP version 13\n1..3\n");
	if (prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0)) {
		printf("not ok 1 PR_SET_MEMORY_MERGE=1 (errno %d)\nnot ok 2 # no child\n"
		       "not ok 3 # no child\n", errno);
		return 1;
	}
	printf("ok 1 PR_SET_MEMORY_MERGE=1\n");
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(child());
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		printf("not ok 2 fork/waitpid failed\n");
		return 1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		/* 2 no merge flag, 3 mmap, 4 sysfs, 5 nothing merged */
		printf("not ok 2 forked child: status %d\n",
		       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	else
		printf("ok 2 PR_SET_MEMORY_MERGE is inherited across fork, and the child's pages merge\n");
	fflush(stdout);
	/* Unmerge and forget everything, so that the exec'd child merges anew. */
	write_str("/sys/kernel/mm/ksm/run", "2");
	pid = fork();
	if (pid == 0) {
		execv("/proc/self/exe", args);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		printf("not ok 3 fork/waitpid failed\n");
		return 1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		/* 2 no merge flag, 3 mmap, 4 sysfs, 5 nothing merged, 127 exec */
		printf("not ok 3 exec'd child: status %d\n",
		       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		return 1;
	}
	printf("ok 3 PR_SET_MEMORY_MERGE is inherited across fork and execve, and pages merge\n");
	write_str("/sys/kernel/mm/ksm/run", "2");
	return 0;
}
