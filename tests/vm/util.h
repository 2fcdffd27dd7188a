/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers that several guest test programs in tests/vm had each a copy of: reading a number
 * from a sysfs or /proc file, writing a string to one, and testing a memory block's sysfs
 * attribute. Each program is built alone from its one .c file (scripts/guest-progs.sh), so these
 * are static inline: a program that does not call one gets no unused-function warning.
 */
#ifndef RKSM_TESTS_VM_UTIL_H
#define RKSM_TESTS_VM_UTIL_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

#endif /* RKSM_TESTS_VM_UTIL_H */
