/* usdtarg: a USDT argument string's i-th argument (usdtarg.h). The format is
 * SystemTap's sys/sdt.h: arguments separated by spaces, each SIZE@OPERAND
 * with SIZE in bytes (negative: signed) and OPERAND in the assembler's
 * syntax: %reg, OFF(%reg), $CONST. */
#include "usdtarg.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../bpf/trace.h"

/* x86-64 struct pt_regs (arch/x86/include/asm/ptrace.h): each register's
 * offset, under its 64-, 32-, 16- and 8-bit names */
static const struct {
	const char *names[4];
	uint8_t off;
} regs[] = {
    {{"r15", "r15d", "r15w", "r15b"}, 0},  {{"r14", "r14d", "r14w", "r14b"}, 8},
    {{"r13", "r13d", "r13w", "r13b"}, 16}, {{"r12", "r12d", "r12w", "r12b"}, 24},
    {{"rbp", "ebp", "bp", "bpl"}, 32},	   {{"rbx", "ebx", "bx", "bl"}, 40},
    {{"r11", "r11d", "r11w", "r11b"}, 48}, {{"r10", "r10d", "r10w", "r10b"}, 56},
    {{"r9", "r9d", "r9w", "r9b"}, 64},	   {{"r8", "r8d", "r8w", "r8b"}, 72},
    {{"rax", "eax", "ax", "al"}, 80},	   {{"rcx", "ecx", "cx", "cl"}, 88},
    {{"rdx", "edx", "dx", "dl"}, 96},	   {{"rsi", "esi", "si", "sil"}, 104},
    {{"rdi", "edi", "di", "dil"}, 112},	   {{"rip", "eip", NULL, NULL}, 128},
    {{"rsp", "esp", "sp", "spl"}, 152},
};

static int reg_off(const char *name, size_t len)
{
	for (size_t r = 0; r < sizeof(regs) / sizeof(regs[0]); r++)
		for (int k = 0; k < 4; k++)
			if (regs[r].names[k] && strlen(regs[r].names[k]) == len &&
			    !strncmp(regs[r].names[k], name, len))
				return regs[r].off;
	return -1;
}

static int fail(const char **why, const char *what)
{
	if (why)
		*why = what;
	return -1;
}

int usdtarg_loc(const char *args, int i, uint32_t *loc, const char **why)
{
	const char *p = args, *end, *at, *reg;
	long size, off = 0;
	char *e;
	int log2, r;
	uint32_t w;

	if (!args)
		return fail(why, "no argument string");
	/* the i-th space-separated argument: [p, end) */
	for (;;) {
		while (*p == ' ')
			p++;
		if (!*p)
			return fail(why, "no such argument");
		end = strchr(p, ' ');
		if (!end)
			end = p + strlen(p);
		if (i-- == 0)
			break;
		p = end;
	}
	size = strtol(p, &e, 10);
	if (e == p || *e != '@' || e >= end)
		return fail(why, "no SIZE@ before the operand");
	if (size < -8 || size > 8)
		return fail(why, "a size other than 1, 2, 4 or 8 bytes");
	at = e + 1;
	switch (labs(size)) {
	case 1:
		log2 = 0;
		break;
	case 2:
		log2 = 1;
		break;
	case 4:
		log2 = 2;
		break;
	case 8:
		log2 = 3;
		break;
	default:
		return fail(why, "a size other than 1, 2, 4 or 8 bytes");
	}
	if (*at == '$')
		return fail(why, "a constant operand");
	w = USDT_LOC_VALID | (uint32_t)log2 << USDT_LOC_SIZE_SHIFT |
	    (size < 0 ? USDT_LOC_SIGNED : 0);
	if (*at == '%') {
		reg = at + 1;
		if ((r = reg_off(reg, (size_t)(end - reg))) < 0)
			return fail(why, "a register this build does not know");
	} else {
		const char *open = memchr(at, '(', (size_t)(end - at));

		off = strtol(at, &e, 10);
		if (!open || e != open || open[1] != '%' || end[-1] != ')')
			return fail(why, "an operand other than %REG, OFF(%REG) or $CONST");
		reg = open + 2;
		if (memchr(reg, ',', (size_t)(end - reg)))
			return fail(why, "an indexed memory operand");
		if ((r = reg_off(reg, (size_t)(end - 1 - reg))) < 0)
			return fail(why, "a register this build does not know");
		if (off < INT16_MIN || off > INT16_MAX)
			return fail(why, "a memory offset beyond 16 bits");
		w |= USDT_LOC_DEREF | ((uint32_t)(uint16_t)(int16_t)off & USDT_LOC_OFF_MASK);
	}
	*loc = w | (uint32_t)r << USDT_LOC_REG_SHIFT;
	return 0;
}
