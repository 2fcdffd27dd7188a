// SPDX-License-Identifier: GPL-2.0
/*
 * A model of rksm's page checksum (PageBytes::checksum, rust/kernel/mm/contents.rs) for pages
 * that are zero but their first word, and a birthday search for two such pages with the same
 * checksum: the pairs the KUnit cases of tests/kunit/merge_tests.rs (colliding_pages) use.
 *
 *   gcc -O2 -o build/checksum-collide scripts/dev/checksum-collide.c
 *   build/checksum-collide PAGE_SIZE [A B]
 *
 * Prints the first pair of first words, from 1 up, whose pages collide at PAGE_SIZE; with A and
 * B, whether those two collide (the model checked against a known pair).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define P 0x9e3779b97f4a7c15ULL
#define LANES 8
#define LIMIT (1UL << 22)

static const uint64_t seeds[LANES] = {
	0x243f6a8885a308d3ULL, 0x13198a2e03707345ULL, 0xa4093822299f31d1ULL, 0x082efa98ec4e6c89ULL,
	0x452821e638d01377ULL, 0xbe5466cf34e90c6dULL, 0xc0ac29b7c97c50ddULL, 0x3f84d5b5b5470917ULL,
};

static uint64_t mix(uint64_t h, uint64_t w)
{
	return __builtin_bswap64((h ^ w) * P);
}

static uint32_t checksum(unsigned long words, uint64_t first)
{
	uint64_t h[LANES], acc = 0;
	unsigned long i;
	int l;

	for (l = 0; l < LANES; l++)
		h[l] = seeds[l];
	for (i = 0; i < words; i++)
		h[i % LANES] = mix(h[i % LANES], i ? 0 : first);
	for (l = 0; l < LANES; l++)
		acc = mix(acc, h[l]);
	acc ^= acc >> 33;
	acc *= 0xff51afd7ed558ccdULL;
	acc ^= acc >> 33;
	acc *= 0xc4ceb9fe1a85ec53ULL;
	acc ^= acc >> 33;
	return (uint32_t)acc;
}

int main(int argc, char **argv)
{
	unsigned long page = argc > 1 ? strtoul(argv[1], NULL, 0) : 0, words = page / 8, v;
	uint32_t *seen;

	if (!page || page % (8 * LANES)) {
		fprintf(stderr, "usage: %s PAGE_SIZE [A B]\n", argv[0]);
		return 2;
	}
	if (argc == 4) {
		uint64_t a = strtoull(argv[2], NULL, 0), b = strtoull(argv[3], NULL, 0);
		uint32_t ca = checksum(words, a), cb = checksum(words, b);

		printf("%lu: %llu -> %08x, %llu -> %08x: %s\n", page, (unsigned long long)a, ca,
		       (unsigned long long)b, cb, ca == cb ? "collide" : "differ");
		return ca != cb;
	}
	/* Open addressing on the checksum: each slot holds the first word that gave it. */
	seen = calloc(LIMIT * 2, sizeof(*seen) * 2);
	if (!seen)
		return 1;
	for (v = 1; v < LIMIT; v++) {
		uint32_t c = checksum(words, v);
		unsigned long s = c % (LIMIT * 2);

		while (seen[2 * s + 1]) {
			if (seen[2 * s] == c) {
				printf("%lu %u %lu\n", page, seen[2 * s + 1], v);
				return 0;
			}
			s = (s + 1) % (LIMIT * 2);
		}
		seen[2 * s] = c;
		seen[2 * s + 1] = v;
	}
	fprintf(stderr, "no pair below %lu\n", LIMIT);
	return 1;
}
