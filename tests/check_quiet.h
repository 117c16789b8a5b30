/* check_quiet.h — Check's assertions without a message per passing assertion.
 *
 * Contract: force-included before every Check suite's own sources (tests/CMakeLists.txt,
 * ovstage_add_check_test); includes <check.h> and redefines ck_assert_msg, on which every ck_assert_*
 * macro of Check 0.15 is built, so that a passing assertion costs only its expression. A failing one
 * calls Check exactly as before (same file, line, expression and message; the test stops).
 *
 * Why: Check's ck_assert_msg records the location of every *passing* assertion (_mark_point): a
 * message packed under one process-wide mutex and written to the test's result pipe, all of which is
 * read back after the test with a memmove of the rest of the buffer per message — quadratic in the
 * passing assertions. The stress tests check every row of every read (10^6 and more assertions), and
 * under ThreadSanitizer on 2 cores that read-back took most of a suite's time (read_compat: 99 s of
 * which its tests' bodies took 46; it timed out at 300 s in CI beside the other suites). The mutex
 * was also a happens-before edge between the threads of every stress test, which could hide from
 * ThreadSanitizer a race the engine has. What is lost: after a crash Check names the last passed
 * assertion's line; the sanitizers' and the signal's own report still name where it happened.
 */
#ifndef OVSTAGE_TESTS_CHECK_QUIET_H
#define OVSTAGE_TESTS_CHECK_QUIET_H

#include <check.h>

#undef ck_assert_msg
#define ck_assert_msg(expr, ...) \
	((expr) ? (void)0 : _ck_assert_failed(__FILE__, __LINE__, "Assertion '" #expr "' failed", ##__VA_ARGS__))

#endif
