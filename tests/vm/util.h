/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers that several guest test programs in tests/vm had each a copy of: reading a number
 * from a sysfs or /proc file, writing a string to one, and a memory block's sysfs attributes
 * (testing one, setting its state, bounded in time, and who maps its pages). Each program is
 * built alone from its one .c file (scripts/guest-progs.sh), so these are static inline: a
 * program that does not call one gets no unused-function warning.
 */
#ifndef RKSM_TESTS_VM_UTIL_H
#define RKSM_TESTS_VM_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define SYSMEM "/sys/devices/system/memory/"

/*
 * The number the file at path begins with (a KSM knob, /proc/self/ksm_merging_pages), or -1 if
 * the file cannot be opened or nothing can be read from it.
 */
static inline long read_long(const char *path)
{
	char buf[64] = "";
	int fd = open(path, O_RDONLY);
	long v = -1;

	if (fd >= 0) {
		if (read(fd, buf, sizeof(buf) - 1) > 0)
			v = strtol(buf, NULL, 10);
		close(fd);
	}
	return v;
}

/* Writes s to the file at path in one write: 0, or -1 if it cannot be opened or written whole. */
static inline int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	int ok;

	if (fd < 0)
		return -1;
	ok = write(fd, s, strlen(s)) == (ssize_t)strlen(s);
	close(fd);
	return ok ? 0 : -1;
}

/*
 * Writes s to the file at path opened with O_TRUNC (what clears tracefs's trace buffer, with s
 * ""). Returns nothing: a file that cannot be opened is skipped silently, a failed write is
 * reported on stderr by perror(path). ksmrace's variant, kept apart from write_str().
 */
static inline void write_str_trunc(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_TRUNC);

	if (fd >= 0) {
		if (write(fd, s, strlen(s)) < 0)
			perror(path);
		close(fd);
	}
}

/* Whether memory block `block`'s sysfs file attr (SYSMEM "memoryN/attr") begins with want. */
static inline int block_attr_is(long block, const char *attr, const char *want)
{
	char path[128], buf[64] = "";
	int fd, n;

	snprintf(path, sizeof(path), SYSMEM "memory%ld/%s", block, attr);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 && !strncmp(buf, want, strlen(want));
}

/* Copies the file at `path` to standard output, each line as a TAP comment. */
static inline void print_file(const char *path)
{
	char line[256];
	FILE *f = fopen(path, "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		printf("#   %s", line);
	fclose(f);
}

/*
 * Writes s to the file at path in one write: 0, or the errno of the open or the write (what a
 * sysfs store returned). write_str() for callers that need the reason.
 */
static inline int write_errno(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY), err = 0;

	if (fd < 0)
		return errno;
	if (write(fd, s, strlen(s)) < 0)
		err = errno;
	close(fd);
	return err;
}

/* The value of KSM's knob `name` (/sys/kernel/mm/ksm/NAME): -1 if it cannot be read. */
static inline long ksm_knob(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/kernel/mm/ksm/%s", name);
	return read_long(path);
}

/* Writes KSM's knob `name`: 0, or the errno of the write. */
static inline int ksm_set_knob(const char *name, long value)
{
	char path[128], buf[32];

	snprintf(path, sizeof(path), "/sys/kernel/mm/ksm/%s", name);
	snprintf(buf, sizeof(buf), "%ld", value);
	return write_errno(path, buf);
}

/* Writes state ("offline", "online_movable", ...) to memory block `block`: 0, or the errno. */
static inline int set_block(long block, const char *state)
{
	char path[128];

	snprintf(path, sizeof(path), SYSMEM "memory%ld/state", block);
	return write_errno(path, state);
}

/* The size of a memory block in bytes (SYSMEM "block_size_bytes", in hex), or 0. */
static inline unsigned long memory_block_size(void)
{
	char buf[32] = "";
	unsigned long size = 0;
	int fd = open(SYSMEM "block_size_bytes", O_RDONLY);

	if (fd >= 0 && read(fd, buf, sizeof(buf) - 1) > 0)
		size = strtoul(buf, NULL, 16);
	if (fd >= 0)
		close(fd);
	return size;
}

/*
 * Prints each area of each process that maps pages of memory block `block`: how many it maps
 * there, how many of those are mapped more than once, and the highest map count among them
 * (/proc/PID/maps and pagemap, /proc/kpagecount; root only). What an offlining that never ends
 * still has to migrate out of the block: a page no one maps is not listed. (Not KSM pages as
 * such: 6.12's /proc/kpageflags reports KPF_KSM for every anonymous page.) Areas larger than
 * 4 GiB are left out (a sparse area's page map is long to read, and test areas are smaller).
 */
static inline void print_block_mappers(long block)
{
	long bsize = memory_block_size(), page = sysconf(_SC_PAGESIZE), listed = 0;
	int counts = open("/proc/kpagecount", O_RDONLY);
	char path[64], line[512];
	DIR *procs = opendir("/proc");
	struct dirent *e;
	int fd;

	while (procs && bsize > 0 && counts >= 0 && (e = readdir(procs))) {
		long pid = strtol(e->d_name, NULL, 10);
		char comm[64] = "?";
		FILE *maps;
		int pm;

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
		fd = open(path, O_RDONLY);
		if (fd >= 0 && read(fd, comm, sizeof(comm) - 1) > 0)
			comm[strcspn(comm, "\n")] = 0;
		if (fd >= 0)
			close(fd);
		snprintf(path, sizeof(path), "/proc/%ld/maps", pid);
		maps = fopen(path, "r");
		snprintf(path, sizeof(path), "/proc/%ld/pagemap", pid);
		pm = open(path, O_RDONLY);
		while (maps && pm >= 0 && fgets(line, sizeof(line), maps)) {
			long mapped = 0, shared = 0, maxcount = 0;
			unsigned long start, end;

			if (sscanf(line, "%lx-%lx", &start, &end) != 2 || end - start > (4UL << 30))
				continue;
			for (unsigned long a = start; a < end; a += page) {
				uint64_t ent = 0, c = 0, pfn;

				if (pread(pm, &ent, 8, a / page * 8) != 8 || !(ent >> 63))
					continue;
				pfn = ent & ((1ULL << 55) - 1);
				if ((long)(pfn * page / bsize) != block)
					continue;
				mapped++;
				if (pread(counts, &c, 8, pfn * 8) != 8)
					continue;
				shared += c > 1;
				if ((long)c > maxcount)
					maxcount = c;
			}
			if (!mapped)
				continue;
			printf("# block %ld: pid %ld (%s), area %lx-%lx: %ld of its pages, %ld mapped more than once (up to %ld times)\n",
			       block, pid, comm, start, end, mapped, shared, maxcount);
			listed++;
		}
		if (maps)
			fclose(maps);
		if (pm >= 0)
			close(pm);
	}
	if (!listed)
		printf("# block %ld: no process maps a page of it\n", block);
	if (procs)
		closedir(procs);
	if (counts >= 0)
		close(counts);
}

/* What set_block_bounded()'s writer thread is given, and what it leaves. */
struct block_writer {
	long block;
	const char *state;
	int tid;	/* the thread's id, for its kernel stack */
	int err;	/* set_block()'s result, once `done` */
	int done;
};

static inline void *block_writer_run(void *arg)
{
	struct block_writer *w = arg;

	__atomic_store_n(&w->tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
	w->err = set_block(w->block, w->state);
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* SIGUSR2's handler while a writer thread is to be interrupted: nothing, but the write ends. */
static inline void block_writer_wake(int sig)
{
	(void)sig;
}

/*
 * set_block(), but in a thread that gets `secs` seconds: offline_pages() retries migration until
 * it succeeds or its caller gets a signal, so a page that never migrates hangs the write
 * forever. A thread, not a child: a forked writer would map every page of the caller, which
 * the offlining it runs must then migrate with twice as many mappings (C KSM's 64 KiB arm64
 * run of 2026-12-02 timed out on such pages: merged pairs, each mapped four times). On time out
 * the writer's kernel stack, the block's state, each node's free memory and who maps the
 * block's pages are printed, the writer is interrupted by SIGUSR2 (the kernel then cancels the
 * offlining) and ETIMEDOUT returned.
 */
static inline int set_block_bounded(long block, const char *state, int secs)
{
	struct block_writer w = { .block = block, .state = state };
	struct sigaction wake = { .sa_handler = block_writer_wake }, old;
	char path[64];
	pthread_t t;

	fflush(stdout);
	/* No SA_RESTART: the interrupted write returns EINTR rather than start over. */
	sigaction(SIGUSR2, &wake, &old);
	if (pthread_create(&t, NULL, block_writer_run, &w)) {
		sigaction(SIGUSR2, &old, NULL);
		return set_block(block, state);
	}
	for (int i = 0; i < secs * 10 && !__atomic_load_n(&w.done, __ATOMIC_ACQUIRE); i++)
		usleep(100000);
	if (__atomic_load_n(&w.done, __ATOMIC_ACQUIRE)) {
		pthread_join(t, NULL);
		sigaction(SIGUSR2, &old, NULL);
		return w.err;
	}
	printf("# block %ld: '%s' still running after %d s; the writer's kernel stack:\n", block,
	       state, secs);
	snprintf(path, sizeof(path), "/proc/self/task/%d/stack",
		 __atomic_load_n(&w.tid, __ATOMIC_ACQUIRE));
	print_file(path);
	snprintf(path, sizeof(path), SYSMEM "memory%ld/state", block);
	print_file(path);
	/* The block's pages go to the other nodes: an -ENOMEM there retries for ever. */
	for (int n = 0; n < 8; n++) {
		char line[160];
		FILE *f;

		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/meminfo", n);
		f = fopen(path, "r");
		if (!f)
			break;
		while (fgets(line, sizeof(line), f))
			if (strstr(line, "MemFree:"))
				printf("# %s", line);
		fclose(f);
	}
	print_block_mappers(block);
	/*
	 * Until the write ends: a signal that comes before the thread enters the write is handled
	 * in user space, and the write then runs on.
	 */
	while (!__atomic_load_n(&w.done, __ATOMIC_ACQUIRE)) {
		pthread_kill(t, SIGUSR2);
		usleep(100000);
	}
	pthread_join(t, NULL);
	sigaction(SIGUSR2, &old, NULL);
	errno = ETIMEDOUT;
	return errno;
}

#endif /* RKSM_TESTS_VM_UTIL_H */
