/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers that several guest test programs in tests/vm had each a copy of: reading a number
 * from a sysfs or /proc file, writing a string to one, and a memory block's sysfs attributes
 * (testing one, setting its state, bounded in time). Each program is built alone from its one .c file (scripts/guest-progs.sh), so these
 * are static inline: a program that does not call one gets no unused-function warning.
 */
#ifndef RKSM_TESTS_VM_UTIL_H
#define RKSM_TESTS_VM_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/*
 * set_block(), but in a child that gets `secs` seconds: offline_pages() retries migration until
 * it succeeds or its caller gets a fatal signal, so a page that never migrates hangs the write
 * forever. On time out the writer's kernel stack, the block's state and each node's free memory
 * are printed, the writer is killed (the kernel then cancels the offlining) and ETIMEDOUT
 * returned.
 */
static inline int set_block_bounded(long block, const char *state, int secs)
{
	char path[64];
	int status = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return set_block(block, state);
	if (!pid)
		_exit(set_block(block, state));
	for (int i = 0; i < secs * 10; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
		usleep(100000);
	}
	printf("# block %ld: '%s' still running after %d s; the writer's kernel stack:\n", block,
	       state, secs);
	snprintf(path, sizeof(path), "/proc/%d/stack", pid);
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
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	errno = ETIMEDOUT;
	return errno;
}

#endif /* RKSM_TESTS_VM_UTIL_H */
