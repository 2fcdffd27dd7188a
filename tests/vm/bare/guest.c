// SPDX-License-Identifier: GPL-2.0
/*
 * A bare-metal QEMU guest for tests/vm/mem_merge.py, on x86: what nested_init does in a Linux
 * guest, without the kernel, whose boot under QEMU's TCG inside the TCG test VM took about ten
 * minutes for three guests. QEMU loads it as a multiboot kernel (-kernel, 32-bit, paging off).
 *
 * From guest-physical 32 MiB on, it lays out the pattern that the command line (-append) asks
 * for, then answers the test on the first serial port, halted between lines (the serial port's
 * interrupt wakes it), so that idle guests leave the CPUs to the host's KSM: see bare.h.
 *
 * Built by scripts/guest-progs.sh with clang for i386, freestanding, no C library.
 */
#include <stdint.h>

#include "bare.h"

/* The kernel's attribute macros, which a freestanding program has to define itself. */
#define __packed __attribute__((packed))
#define __aligned(x) __attribute__((aligned(x)))
#define __used __attribute__((used))
#define __section(s) __attribute__((section(s)))

#define MB_MAGIC 0x1BADB002u
#define MB_FLAGS 0u
#define MB_INFO_MEM (1u << 0)
#define MB_INFO_CMDLINE (1u << 2)

/* The multiboot header, first in the image (tests/vm/bare/guest.ld). */
__section(".multiboot") __used __aligned(4)
static const uint32_t multiboot_header[3] = { MB_MAGIC, MB_FLAGS, -(MB_MAGIC + MB_FLAGS) };

#define BASE (32u << 20)
#define COM1 0x3f8
#define PIC1 0x20
#define PIC2 0xa0

uint8_t guest_stack[16384] __aligned(16);

/* Entered in 32-bit protected mode, interrupts off; EBX holds the multiboot information. */
__asm__(".text\n"
	".globl _start\n"
	"_start:\n"
	"	movl $guest_stack + 16384, %esp\n"
	"	pushl %ebx\n"
	"	pushl %eax\n"
	"	call guest_main\n"
	"1:	cli\n"
	"	hlt\n"
	"	jmp 1b\n"
	/* Every interrupt: end it at both PICs, return. */
	".globl irq_stub\n"
	"irq_stub:\n"
	"	pushl %eax\n"
	"	movb $0x20, %al\n"
	"	outb %al, $0xa0\n"
	"	outb %al, $0x20\n"
	"	popl %eax\n"
	"	iret\n");

void irq_stub(void);

static inline void outb(uint16_t port, uint8_t v)
{
	__asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static inline uint8_t inb(uint16_t port)
{
	uint8_t v;

	__asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static void putc_serial(char c)
{
	while (!(inb(COM1 + 5) & 0x20))
		;
	outb(COM1, c);
}

struct idt_gate {
	uint16_t off_lo, sel;
	uint8_t zero, type;
	uint16_t off_hi;
} __packed;

static struct idt_gate idt[256] __aligned(8);

/*
 * Every vector to irq_stub, the PICs' IRQs at vectors 0x20-0x2f with only COM1's (IRQ 4)
 * unmasked, and COM1 interrupting when a byte arrives.
 */
static void setup_interrupts(void)
{
	struct {
		uint16_t limit;
		uint32_t base;
	} __packed idtr = { sizeof(idt) - 1, (uint32_t)idt };
	uint16_t cs;

	__asm__ volatile("movw %%cs, %0" : "=r"(cs));
	for (int i = 0; i < 256; i++) {
		idt[i].off_lo = (uint32_t)irq_stub & 0xffff;
		idt[i].off_hi = (uint32_t)irq_stub >> 16;
		idt[i].sel = cs;
		idt[i].zero = 0;
		idt[i].type = 0x8e; /* present, ring 0, 32-bit interrupt gate */
	}
	__asm__ volatile("lidt %0" : : "m"(idtr));
	outb(PIC1, 0x11);
	outb(PIC2, 0x11);
	outb(PIC1 + 1, 0x20);
	outb(PIC2 + 1, 0x28);
	outb(PIC1 + 1, 4);
	outb(PIC2 + 1, 2);
	outb(PIC1 + 1, 1);
	outb(PIC2 + 1, 1);
	outb(PIC1 + 1, 0xff & ~(1 << 4));
	outb(PIC2 + 1, 0xff);
	outb(COM1 + 1, 0x01); /* interrupt on received data */
	outb(COM1 + 4, 0x0b); /* DTR, RTS, OUT2: OUT2 lets the interrupt reach the PIC */
}

/* Waits for a byte on COM1, halted between interrupts. */
static char getc_serial(void)
{
	for (;;) {
		__asm__ volatile("cli");
		if (inb(COM1 + 5) & 0x01)
			return inb(COM1);
		/* sti's one-instruction shadow: no interrupt is taken before hlt. */
		__asm__ volatile("sti\n\thlt");
	}
}

void guest_main(uint32_t magic, const uint32_t *info)
{
	const char *cmdline = 0;
	uint64_t ram_end = 0;
	uint32_t pages, words;

	if (magic == 0x2BADB002u && (info[0] & MB_INFO_CMDLINE))
		cmdline = (const char *)info[4];
	/* Memory above 1 MiB, in KiB: the pattern must fit below its end. */
	if (magic == 0x2BADB002u && (info[0] & MB_INFO_MEM))
		ram_end = (uint64_t)(1 + info[2] / 1024) << 20;
	if (!lay_out(cmdline, BASE, ram_end, &pages, &words))
		return;
	setup_interrupts();
	serve(BASE, pages, words);
}
