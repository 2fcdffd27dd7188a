// SPDX-License-Identifier: GPL-2.0
/*
 * /init of the small QEMU guests that `make bench` boots inside the test VM (the paper's
 * real-VM case). It fills `nested.mib=N` MiB (default 16) of anonymous memory with a pattern
 * that is the same in every guest (page i, of the guest's page size, holds i + 1 in its last 8
 * bytes, zero elsewhere, as ksmpages' worst case) and prints "ready <pages>" on the console.
 * Then, for every line it reads from the console, it checks every byte and prints "ok <round>"
 * or "BAD page <i>": merging by the host's KSM must never change what a guest reads. Between
 * checks the guest idles.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* The kernel's page size, set first thing in main(). */
static unsigned long PAGE;

static unsigned long param(int argc, char **argv, char **envp, const char *key, unsigned long def)
{
	size_t n = strlen(key);
	char **e;

	/* The kernel passes unknown "key=value" words of its command line as environment. */
	for (e = envp; *e; e++)
		if (!strncmp(*e, key, n) && (*e)[n] == '=')
			return strtoul(*e + n + 1, NULL, 0);
	(void)argc;
	(void)argv;
	return def;
}

int main(int argc, char **argv, char **envp)
{
	unsigned long mib = param(argc, argv, envp, "nested.mib", 16);
	unsigned long pages, i, round = 0;
	char line[64];
	uint64_t *mem;
	int fd;

	PAGE = sysconf(_SC_PAGESIZE);
	pages = (mib << 20) / PAGE;
	mkdir("/dev", 0755);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	fd = open("/dev/ttyS0", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	mem = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		printf("BAD mmap\n");
		for (;;)
			pause();
	}
	for (i = 0; i < pages; i++)
		mem[i * (PAGE / 8) + PAGE / 8 - 1] = i + 1;
	printf("ready %lu\n", pages);
	while (fgets(line, sizeof(line), stdin)) {
		for (i = 0; i < pages; i++) {
			uint64_t *p = mem + i * (PAGE / 8);
			unsigned long w;

			for (w = 0; w < PAGE / 8 - 1; w++)
				if (p[w])
					break;
			if (w < PAGE / 8 - 1 || p[PAGE / 8 - 1] != i + 1)
				break;
		}
		if (i < pages)
			printf("BAD page %lu\n", i);
		else
			printf("ok %lu\n", ++round);
	}
	for (;;)
		pause();
}
