// SPDX-License-Identifier: GPL-2.0
/*
 * The bare-metal QEMU guest of tests/vm/mem_merge.py on arm64 (guest.c's, for QEMU's virt
 * machine): QEMU loads it as an ELF image (-kernel), entered at EL1 with the MMU off, and puts
 * the device tree at the start of RAM, where this guest finds its command line (-append) and the
 * size of RAM.
 *
 * From 32 MiB into RAM, it lays out the pattern that the command line asks for, then answers the
 * test on the PL011 UART, halted between lines, so that idle guests leave the CPUs to the host's
 * KSM: see bare.h. It halts in WFI with interrupts masked: the UART's receive interrupt, routed
 * through the GIC, still ends a WFI, and none is ever taken, so the guest needs no vectors.
 *
 * Built by scripts/guest-progs.sh with clang for aarch64, freestanding, no C library, general
 * registers only (the FP unit is off at EL1 after reset) and aligned accesses only (with the MMU
 * off every data access is to Device memory, where an unaligned one faults).
 */
#include <stdint.h>

#include "bare.h"

#define __aligned(x) __attribute__((aligned(x)))

/* QEMU's virt machine: RAM, the device tree at its start, the GICv2, the first UART. */
#define RAM_BASE 0x40000000ul
#define BASE (RAM_BASE + (32ul << 20))
#define GICD 0x08000000ul
#define GICC 0x08010000ul
#define UART 0x09000000ul
#define UART_INTID 33 /* SPI 1 */

#define UARTDR 0x00
#define UARTFR 0x18
#define UARTFR_RXFE (1u << 4)
#define UARTFR_TXFF (1u << 5)
#define UARTCR 0x30
#define UARTIMSC 0x38
#define UARTIMSC_RXIM (1u << 4)

uint8_t guest_stack[16384] __aligned(16);

/* Entered at EL1, MMU off, interrupts masked (as they stay). */
__asm__(".section .text.start, \"ax\"\n"
	".globl _start\n"
	"_start:\n"
	"	adrp x0, guest_stack + 16384\n"
	"	add x0, x0, :lo12:guest_stack + 16384\n"
	"	mov sp, x0\n"
	"	bl guest_main\n"
	"1:	wfi\n"
	"	b 1b\n"
	".text\n");

static inline uint32_t mmio_read(uintptr_t addr)
{
	return *(volatile uint32_t *)addr;
}

static inline void mmio_write(uintptr_t addr, uint32_t v)
{
	*(volatile uint32_t *)addr = v;
}

static inline void mmio_write8(uintptr_t addr, uint8_t v)
{
	*(volatile uint8_t *)addr = v;
}

static void putc_serial(char c)
{
	while (mmio_read(UART + UARTFR) & UARTFR_TXFF)
		;
	mmio_write(UART + UARTDR, (uint8_t)c);
}

/* Waits for a byte on the UART, in WFI until its receive interrupt is pending. */
static char getc_serial(void)
{
	while (mmio_read(UART + UARTFR) & UARTFR_RXFE)
		__asm__ volatile("wfi" ::: "memory");
	return (char)mmio_read(UART + UARTDR);
}

/* The UART's receive interrupt, pending at the CPU interface (never taken: see above). */
static void setup_interrupts(void)
{
	mmio_write(GICD + 0x000, 1); /* GICD_CTLR: forward */
	mmio_write8(GICD + 0x400 + UART_INTID, 0xa0); /* GICD_IPRIORITYR */
	mmio_write8(GICD + 0x800 + UART_INTID, 1); /* GICD_ITARGETSR: CPU 0 */
	mmio_write(GICD + 0x100 + 4 * (UART_INTID / 32), 1u << (UART_INTID % 32)); /* ISENABLER */
	mmio_write(GICC + 0x004, 0xf0); /* GICC_PMR: every priority above 0xf0 */
	mmio_write(GICC + 0x000, 1); /* GICC_CTLR: signal */
	mmio_write(UART + UARTIMSC, UARTIMSC_RXIM);
	mmio_write(UART + UARTCR, 0x301); /* UARTEN, TXE, RXE */
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int str_eq(const char *a, const char *b)
{
	while (*a && *a == *b) {
		a++;
		b++;
	}
	return *a == *b;
}

static int starts_with(const char *s, const char *prefix)
{
	while (*prefix && *s == *prefix) {
		s++;
		prefix++;
	}
	return !*prefix;
}

/*
 * From the flattened device tree at fdt: /chosen's bootargs and the end of the first range of
 * the first /memory node (#address-cells and #size-cells 2, as virt has them). Returns 0 if fdt
 * is not a device tree.
 */
static int read_fdt(const uint8_t *fdt, const char **cmdline, uint64_t *ram_end)
{
	enum { BEGIN_NODE = 1, END_NODE = 2, PROP = 3, NOP = 4, END = 9 };
	const uint8_t *p, *strings;
	const char *node = "";
	int depth = 0;

	if (be32(fdt) != 0xd00dfeed)
		return 0;
	p = fdt + be32(fdt + 8);
	strings = fdt + be32(fdt + 12);
	for (;;) {
		uint32_t token = be32(p), len;
		const char *name;

		p += 4;
		switch (token) {
		case BEGIN_NODE:
			name = (const char *)p;
			if (++depth == 2)
				node = name;
			while (*p)
				p++;
			p = (const uint8_t *)(((uintptr_t)p + 4) & ~(uintptr_t)3);
			break;
		case END_NODE:
			depth--;
			break;
		case PROP:
			len = be32(p);
			name = (const char *)strings + be32(p + 4);
			p += 8;
			if (depth == 2 && str_eq(node, "chosen") && str_eq(name, "bootargs"))
				*cmdline = (const char *)p;
			if (depth == 2 && starts_with(node, "memory") && str_eq(name, "reg") &&
			    len >= 16 && !*ram_end)
				*ram_end = ((uint64_t)be32(p) << 32 | be32(p + 4)) +
					   ((uint64_t)be32(p + 8) << 32 | be32(p + 12));
			p += (len + 3) & ~3u;
			break;
		case NOP:
			break;
		default:
			return token == END;
		}
	}
}

void guest_main(void)
{
	const char *cmdline = 0;
	uint64_t ram_end = 0;
	uint32_t pages, words;

	if (!read_fdt((const uint8_t *)RAM_BASE, &cmdline, &ram_end)) {
		puts_serial("BAD device tree: none at the start of RAM\n");
		return;
	}
	if (!lay_out(cmdline, BASE, ram_end, &pages, &words))
		return;
	setup_interrupts();
	serve(BASE, pages, words);
}
