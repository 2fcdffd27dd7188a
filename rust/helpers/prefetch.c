// SPDX-License-Identifier: GPL-2.0

#include <linux/prefetch.h>

void rust_helper_prefetch(const void *x)
{
	prefetch(x);
}
