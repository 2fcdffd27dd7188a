// SPDX-License-Identifier: GPL-2.0

#include <kunit/test-bug.h>

/*
 * Fails the KUnit test running on this thread with a message "<file>:<line>: <msg>", where msg
 * is printed from @fmt and @arg (one argument, such as "%pA" and a Rust fmt::Arguments).
 * Returns false, doing nothing, when no test runs on this thread.
 */
bool rust_helper_kunit_fail_current_test(const char *file, int line, const char *fmt,
					 const void *arg)
{
	if (!kunit_get_current_test())
		return false;
	kunit_hooks.fail_current_test(file, line, fmt, arg);
	return true;
}
