// SPDX-License-Identifier: GPL-2.0
/*
 * Development tool: how fast rksm's page checksum (PageBytes::checksum in
 * rust/kernel/mm/contents.rs: eight lanes of h = bswap((h ^ word) * P)) and some variants of it
 * read a page, against memcmp() of the page with one in the caches, and what rksm's sample of a
 * page (PageBytes::sample: eight lines) and smaller ones cost, in host user space on the host's
 * processor. PAGES pages (default 1 GiB of 4 KiB pages: out of the caches) are visited in
 * a random order, as a scan meets the physical pages of a process; PAGES=128 keeps them in the
 * caches, which gives the computation alone. The variants are not the kernel's code: they are
 * re-written here to compare designs.
 *
 *   cc -O2 -o build/checksum-speed scripts/dev/checksum-speed.c && build/checksum-speed [PAGES]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t page, words;

#define P 0x9e3779b97f4a7c15ull

static inline uint64_t mix(uint64_t h, uint64_t w)
{
	return __builtin_bswap64((h ^ w) * P);
}

static uint32_t finish(const uint64_t *h, int n)
{
	uint64_t x = 0;

	for (int i = 0; i < n; i++)
		x = mix(x, h[i]);
	return (uint32_t)(x ^ (x >> 32));
}

/* rksm's design: eight lanes over every eighth word. */
static uint32_t lanes8(const volatile uint64_t *p)
{
	uint64_t h[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	for (size_t i = 0; i < words; i += 8)
		for (int l = 0; l < 8; l++)
			h[l] = mix(h[l], p[i + l]);
	return finish(h, 8);
}

/* Four lanes over each half of the page at once: two streams of loads. */
static uint32_t halves(const volatile uint64_t *p)
{
	const volatile uint64_t *q = p + words / 2;
	uint64_t h[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	for (size_t i = 0; i < words / 2; i += 4)
		for (int l = 0; l < 4; l++) {
			h[l] = mix(h[l], p[i + l]);
			h[4 + l] = mix(h[4 + l], q[i + l]);
		}
	return finish(h, 8);
}

/* rksm's design with a prefetch eight lines ahead. */
static uint32_t ahead(const volatile uint64_t *p)
{
	uint64_t h[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	for (size_t i = 0; i < words; i += 8) {
		__builtin_prefetch((const void *)(p + i + 64));
		for (int l = 0; l < 8; l++)
			h[l] = mix(h[l], p[i + l]);
	}
	return finish(h, 8);
}

/* One 64 x 64 -> 128-bit multiplication per two words (wyhash's step), four lanes. */
static inline uint64_t mum(uint64_t a, uint64_t b)
{
	__uint128_t r = (__uint128_t)a * b;

	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static uint32_t wide(const volatile uint64_t *p)
{
	static const uint64_t k[4] = { 0xa0761d6478bd642full, 0xe7037ed1a0b428dbull,
				       0x8ebc6af09c88c6e3ull, 0x589965cc75374cc3ull };
	uint64_t h[4] = { 1, 2, 3, 4 };

	for (size_t i = 0; i < words; i += 8)
		for (int l = 0; l < 4; l++)
			h[l] = mum(h[l] ^ p[i + 2 * l], p[i + 2 * l + 1] ^ k[l]);
	return finish(h, 4);
}

/*
 * A sample of `runs` lines of eight words, the page's first and last and the others spread evenly
 * between, hashed in eight lanes: with eight, rksm's (PageBytes::sample).
 */
static uint32_t sample(const volatile uint64_t *p, size_t runs)
{
	uint64_t h[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	size_t lines = words / 8;

	for (size_t k = 0; k < runs; k++) {
		size_t i = (runs > 1 ? k * (lines - 1) / (runs - 1) : 0) * 8;

		for (int l = 0; l < 8; l++)
			h[l] = mix(h[l], p[i + l]);
	}
	return finish(h, 8);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	static const char * const names[] = {
		"checksum, 8 lanes (rksm's)", "checksum, two halves at once",
		"checksum, prefetch 8 lines ahead", "checksum, 128-bit multiply",
		"memcmp with a cached page", "sample, 8 lines (rksm's)",
		"sample, 2 lines", "sample, 1 line",
	};
	size_t n, *order;
	uint64_t *buf, *ref;

	page = sysconf(_SC_PAGESIZE);
	words = page / 8;
	n = argc > 1 ? strtoul(argv[1], NULL, 0) : (1ul << 30) / page;
	buf = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ref = malloc(page);
	order = malloc(n * sizeof(*order));
	if (buf == MAP_FAILED || !ref || !order)
		return 1;
	madvise(buf, n * page, MADV_NOHUGEPAGE);
	memset(buf, 0x5a, n * page);
	memset(ref, 0x5a, page);
	srand(1);
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = rand() % (i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	printf("%zu pages of %zu bytes, random order; ns per page, 3 rounds\n", n, page);
	for (int k = 0; k < 8; k++) {
		printf("%-34s", names[k]);
		for (int round = 0; round < 3; round++) {
			uint64_t sink = 0;
			double t0 = now();

			for (size_t i = 0; i < n; i++) {
				const uint64_t *pg = buf + order[i] * words;

				switch (k) {
				case 0: sink += lanes8(pg); break;
				case 1: sink += halves(pg); break;
				case 2: sink += ahead(pg); break;
				case 3: sink += wide(pg); break;
				case 4: sink += memcmp(pg, ref, page) != 0; break;
				case 5: sink += sample(pg, 8); break;
				case 6: sink += sample(pg, 2); break;
				default: sink += sample(pg, 1);
				}
			}
			printf(" %6.0f%s", (now() - t0) * 1e9 / n, sink == 42 ? "!" : "");
		}
		printf("\n");
	}
	return 0;
}
