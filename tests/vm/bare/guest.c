// SPDX-License-Identifier: GPL-2.0
/*
 * A bare-metal QEMU guest for tests/vm/mem_merge.py: what nested_init does in a Linux guest,
 * without the kernel, whose boot under QEMU's TCG inside the TCG test VM took about ten minutes
 * for three guests. QEMU loads it as a multiboot kernel (-kernel, 32-bit, paging off).
 *
 * Command line (-append): "page=P mib=M", P the host's page size (the guest has no pages of its
 * own: it lays its pattern out by the host's, which KSM merges), M MiB of pattern (default 16).
 * From guest-physical 32 MiB on, it writes the pattern of nested_init and ksmpages' worst case
 * (page i holds i + 1 in its last 8 bytes, zero elsewhere, the same in every guest) and prints
 * "ready <pages>" on the first serial port. Then for every line it reads there it checks every
 * byte and prints "ok <round>" or "BAD page <i>", halted between lines (the serial port's
 * interrupt wakes it), so that idle guests leave the CPUs to the host's KSM.
 *
 * Built by scripts/guest-progs.sh with clang for i386, freestanding, no C library.
 */
#include <stdint.h>

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

void guest_main(uint32_t magic, const uint32_t *info)
{
	const char *cmdline = 0;
	uint32_t page, mib, pages, words, round = 0, ram_mib = 0;
	volatile uint32_t *mem = (volatile uint32_t *)BASE;

	if (magic == 0x2BADB002u && (info[0] & MB_INFO_CMDLINE))
		cmdline = (const char *)info[4];
	/* Memory above 1 MiB, in KiB: the pattern must fit below its end. */
	if (magic == 0x2BADB002u && (info[0] & MB_INFO_MEM))
		ram_mib = 1 + info[2] / 1024;
	page = param(cmdline, "page", 0);
	mib = param(cmdline, "mib", 16);
	if (page < 16 || (page & (page - 1)) || !mib || mib > 1024 || (mib << 20) < page) {
		puts_serial("BAD command line: page=P (a power of two) mib=M (1 to 1024)\n");
		return;
	}
	if ((BASE >> 20) + mib > ram_mib) {
		puts_serial("BAD memory: the pattern does not fit below the end of RAM\n");
		return;
	}
	pages = (mib << 20) / page;
	words = page / 4;
	for (uint32_t i = 0; i < pages * words; i++)
		mem[i] = 0;
	for (uint32_t i = 0; i < pages; i++)
		mem[i * words + words - 2] = i + 1; /* little-endian: the 64-bit value i + 1 */
	setup_interrupts();
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
