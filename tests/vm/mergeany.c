// SPDX-License-Identifier: GPL-2.0
/*
 * mergeany: runs a command with PR_SET_MEMORY_MERGE set, so that KSM may merge every anonymous
 * page of it and of every process it forks or executes (the setting is inherited across fork()
 * and kept across execve(): tests/vm/prctl_fork_exec checks that). make test runs the kernel's
 * mm selftests under it (tests/vm/guest-tests.sh).
 *
 * Usage: mergeany COMMAND [ARG...]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef PR_SET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67
#endif

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: mergeany COMMAND [ARG...]\n");
		return 2;
	}
	if (prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0)) {
		perror("mergeany: PR_SET_MEMORY_MERGE");
		return 2;
	}
	execvp(argv[1], argv + 1);
	perror(argv[1]);
	return 127;
}
