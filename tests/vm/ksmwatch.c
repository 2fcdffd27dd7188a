// SPDX-License-Identifier: GPL-2.0
/*
 * ksmwatch: times KSM merging for the benchmark (tests/vm/ksmbench.py) without taking the CPU
 * that the scanner threads need. A Python loop that read sysfs and /proc/meminfo every 50 ms
 * took 10 to 16% of a vCPU under TCG; this takes well under 1%.
 *
 *   ksmwatch total PAGES [INTERVAL_MS TIMEOUT_S]
 *       writes 1 to run, then samples until pages_shared + pages_sharing >= PAGES
 *   ksmwatch stable BASE [INTERVAL_MS TIMEOUT_S]
 *       writes 1 to run, then samples until pages_sharing has not grown for three full scans
 *       since it last grew (and at least since BASE)
 *
 * Every sample is one line "t shared sharing full_scans memfree_mib", t in seconds since run
 * was written; MemFree is read every tenth sample only (it costs more), and -1 in between.
 * The last line is "done t" (the condition held at t) or "timeout t". Every 5 s a progress
 * line goes to stderr. Exits 0 on done, 1 on timeout, 2 on an error.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KSM "/sys/kernel/mm/ksm/"

static int open_or_die(const char *path, int flags)
{
	int fd = open(path, flags);

	if (fd < 0) {
		perror(path);
		exit(2);
	}
	return fd;
}

static long read_long(int fd)
{
	char buf[64];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0) {
		perror("pread");
		exit(2);
	}
	buf[n] = 0;
	return strtol(buf, NULL, 10);
}

static long memfree_mib(int fd)
{
	static char buf[8192];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	char *p;

	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strstr(buf, "MemFree:");
	return p ? strtol(p + 8, NULL, 10) / 1024 : -1;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	int shared_fd, sharing_fd, scans_fd, mem_fd, run_fd;
	long goal, interval_ms, best, scans_at_best = 0;
	double timeout, t0, t, shown = 0;
	int stable, i;

	if (argc < 3 || (strcmp(argv[1], "total") && strcmp(argv[1], "stable"))) {
		fprintf(stderr, "usage: ksmwatch total|stable N [INTERVAL_MS TIMEOUT_S]\n");
		return 2;
	}
	stable = !strcmp(argv[1], "stable");
	goal = strtol(argv[2], NULL, 10);
	interval_ms = argc > 3 ? strtol(argv[3], NULL, 10) : 10;
	timeout = argc > 4 ? strtod(argv[4], NULL) : 900;
	shared_fd = open_or_die(KSM "pages_shared", O_RDONLY);
	sharing_fd = open_or_die(KSM "pages_sharing", O_RDONLY);
	scans_fd = open_or_die(KSM "full_scans", O_RDONLY);
	mem_fd = open_or_die("/proc/meminfo", O_RDONLY);
	run_fd = open_or_die(KSM "run", O_WRONLY);
	best = goal;
	t0 = now();
	if (write(run_fd, "1", 1) != 1) {
		perror("run");
		return 2;
	}
	for (i = 0;; i++) {
		long shared = read_long(shared_fd), sharing = read_long(sharing_fd);
		long scans = read_long(scans_fd);

		t = now() - t0;
		printf("%.3f %ld %ld %ld %ld\n", t, shared, sharing, scans,
		       i % 10 ? -1 : memfree_mib(mem_fd));
		if (!stable && shared + sharing >= goal)
			break;
		if (stable) {
			if (sharing > best || i == 0) {
				if (sharing > best)
					best = sharing;
				scans_at_best = scans;
			} else if (scans >= scans_at_best + 3) {
				break;
			}
		}
		if (t - shown >= 5) {
			shown = t;
			if (stable)
				fprintf(stderr, "#   %5.0fs  pages_sharing %ld, full_scans %ld\n", t,
					sharing, scans);
			else
				fprintf(stderr, "#   %5.0fs  %3ld%% merged\n", t,
					100 * (shared + sharing) / (goal ? goal : 1));
		}
		if (t > timeout) {
			printf("timeout %.3f\n", t);
			return 1;
		}
		usleep(interval_ms * 1000);
	}
	printf("done %.3f\n", t);
	return 0;
}
