/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the bare-metal guests of tests/vm/mem_merge.py share (guest.c for x86, guest-arm64.c for
 * arm64): the command line's parameters, the pattern, and the loop that answers the test on the
 * serial port. The including file defines putc_serial() and getc_serial() (declared here; the
 * latter waits, halted, for a byte).
 *
 * Command line: "page=P mib=M", P the host's page size (the guest has no pages of its own: it
 * lays its pattern out by the host's, which KSM merges), M MiB of pattern (default 16). The
 * pattern is nested_init's and ksmpages' worst case: page i holds i + 1 in its last 8 bytes,
 * zero elsewhere, the same in every guest.
 */
#ifndef BARE_H
#define BARE_H

#include <stdint.h>

static void putc_serial(char c);
static char getc_serial(void);

static void puts_serial(const char *s)
{
	while (*s)
		putc_serial(*s++);
}

static void putu(uint32_t v)
{
	char buf[12];
	int n = 0;

	do {
		buf[n++] = '0' + v % 10;
		v /= 10;
	} while (v);
	while (n)
		putc_serial(buf[--n]);
}

/* The value of "key=" in the command line, or def. */
static uint32_t param(const char *cmdline, const char *key, uint32_t def)
{
	for (const char *p = cmdline; p && *p; p++) {
		const char *k = key, *q = p;

		if (p != cmdline && p[-1] != ' ')
			continue;
		while (*k && *q == *k) {
			k++;
			q++;
		}
		if (*k || *q != '=')
			continue;
		uint32_t v = 0;

		for (q++; *q >= '0' && *q <= '9'; q++)
			v = v * 10 + (*q - '0');
		return v;
	}
	return def;
}

/* The first page that does not hold its pattern, or pages if every one does. */
static uint32_t check(volatile uint32_t *mem, uint32_t pages, uint32_t words)
{
	for (uint32_t i = 0; i < pages; i++) {
		volatile uint32_t *p = mem + i * words;

		for (uint32_t w = 0; w < words - 2; w++)
			if (p[w])
				return i;
		if (p[words - 2] != i + 1 || p[words - 1])
			return i;
	}
	return pages;
}

/*
 * Reads the command line's page size and MiB and lays the pattern out from guest-physical
 * mem_start, in memory that ends at ram_end (0 if unknown); gives its pages and the 32-bit words
 * a page, or prints why not and returns 0. The including file then sets up the serial port's
 * interrupt and calls serve().
 */
static int lay_out(const char *cmdline, uintptr_t mem_start, uint64_t ram_end, uint32_t *pages,
		   uint32_t *words)
{
	volatile uint32_t *mem = (volatile uint32_t *)mem_start;
	uint32_t page = param(cmdline, "page", 0), mib = param(cmdline, "mib", 16);

	if (page < 16 || (page & (page - 1)) || !mib || mib > 1024 || (mib << 20) < page) {
		puts_serial("BAD command line: page=P (a power of two) mib=M (1 to 1024)\n");
		return 0;
	}
	if (mem_start + ((uint64_t)mib << 20) > ram_end) {
		puts_serial("BAD memory: the pattern does not fit below the end of RAM\n");
		return 0;
	}
	*pages = (mib << 20) / page;
	*words = page / 4;
	for (uint32_t i = 0; i < *pages * *words; i++)
		mem[i] = 0;
	for (uint32_t i = 0; i < *pages; i++)
		mem[i * *words + *words - 2] = i + 1; /* little-endian: the 64-bit value i + 1 */
	return 1;
}

/*
 * Prints "ready <pages>", then for every line read on the serial port checks every byte and
 * prints "ok <round>" or "BAD page <i>"; getc_serial() halts between lines, so that idle guests
 * leave the CPUs to the host's KSM.
 */
static void serve(uintptr_t mem_start, uint32_t pages, uint32_t words)
{
	volatile uint32_t *mem = (volatile uint32_t *)mem_start;
	uint32_t round = 0;

	puts_serial("ready ");
	putu(pages);
	putc_serial('\n');
	for (;;) {
		char c = getc_serial();
		uint32_t bad;

		if (c != '\n')
			continue;
		bad = check(mem, pages, words);
		if (bad < pages) {
			puts_serial("BAD page ");
			putu(bad);
		} else {
			puts_serial("ok ");
			putu(++round);
		}
		putc_serial('\n');
	}
}

#endif
