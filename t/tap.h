/* A tiny header-only TAP producer for the C unit tests (one test program per
 * translation unit, so the counters can be file-static).
 *
 *   plan(N) or plan_no_plan(); ok(cond, "what it proves %d", x);
 *   is_int(got, want, "..."); is_str(got, want, "..."); like(got, "sub", "...");
 *   diag("..."); skip(n, "why"); return done_testing();
 *
 * done_testing() prints the trailing plan when none was given and returns the
 * exit status: 0 only when every test passed and the count matches the plan. */
#ifndef SBX_TAP_H
#define SBX_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_planned = -1;
static int tap_run;
static int tap_failed;

static inline void plan(int n)
{
	tap_planned = n;
	printf("1..%d\n", n);
	fflush(stdout);
}

static inline void plan_no_plan(void)
{
	tap_planned = -1;
}

static inline void tap_vdiag(const char *prefix, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
static inline void tap_vdiag(const char *prefix, const char *fmt, va_list ap)
{
	/* diagnostics go to stdout, behind '#', so the TAP driver keeps them in the .log */
	fputs(prefix, stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	fflush(stdout);
}

static inline void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void diag(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_vdiag("# ", fmt, ap);
	va_end(ap);
}

static inline int tap_vok(int cond, const char *file, int line, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));
static inline int tap_vok(int cond, const char *file, int line, const char *fmt, va_list ap)
{
	tap_run++;
	if (!cond)
		tap_failed++;
	printf("%sok %d - ", cond ? "" : "not ", tap_run);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	if (!cond)
		printf("#   Failed test at %s line %d\n", file, line);
	fflush(stdout);
	return cond;
}

static inline int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static inline int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = tap_vok(cond, file, line, fmt, ap);
	va_end(ap);
	return r;
}

static inline int tap_is_int(long long got, long long want, const char *file, int line,
			     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static inline int tap_is_int(long long got, long long want, const char *file, int line,
			     const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = tap_vok(got == want, file, line, fmt, ap);
	va_end(ap);
	if (!r)
		printf("#          got: %lld\n#     expected: %lld\n", got, want);
	return r;
}

static inline int tap_is_str(const char *got, const char *want, const char *file, int line,
			     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static inline int tap_is_str(const char *got, const char *want, const char *file, int line,
			     const char *fmt, ...)
{
	va_list ap;
	int same = (got == NULL && want == NULL) || (got && want && strcmp(got, want) == 0);
	int r;

	va_start(ap, fmt);
	r = tap_vok(same, file, line, fmt, ap);
	va_end(ap);
	if (!r)
		printf("#          got: %s%s%s\n#     expected: %s%s%s\n", got ? "'" : "",
		       got ? got : "NULL", got ? "'" : "", want ? "'" : "", want ? want : "NULL",
		       want ? "'" : "");
	return r;
}

/* got contains the substring want */
static inline int tap_like(const char *got, const char *want, const char *file, int line,
			   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static inline int tap_like(const char *got, const char *want, const char *file, int line,
			   const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = tap_vok(got && want && strstr(got, want) != NULL, file, line, fmt, ap);
	va_end(ap);
	if (!r)
		printf("#          got: '%s'\n#  to contain: '%s'\n", got ? got : "(null)",
		       want ? want : "(null)");
	return r;
}

static inline void skip(int n, const char *why)
{
	for (int i = 0; i < n; i++) {
		tap_run++;
		printf("ok %d # SKIP %s\n", tap_run, why);
	}
	fflush(stdout);
}

static inline int done_testing(void)
{
	if (tap_planned < 0) {
		printf("1..%d\n", tap_run);
		tap_planned = tap_run;
	}
	if (tap_run != tap_planned)
		printf("# Looks like you planned %d tests but ran %d.\n", tap_planned, tap_run);
	if (tap_failed)
		printf("# Looks like you failed %d test%s of %d.\n", tap_failed, tap_failed == 1 ? "" : "s",
		       tap_run);
	fflush(stdout);
	return (tap_failed || tap_run != tap_planned) ? 1 : 0;
}

/* Stop here: a precondition failed and the rest would only crash. */
static inline void bail_out(const char *why)
{
	printf("Bail out! %s\n", why);
	fflush(stdout);
	exit(255);
}

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_int(got, want, ...) tap_is_int((long long)(got), (long long)(want), __FILE__, __LINE__, __VA_ARGS__)
#define is_str(got, want, ...) tap_is_str((got), (want), __FILE__, __LINE__, __VA_ARGS__)
#define like(got, want, ...) tap_like((got), (want), __FILE__, __LINE__, __VA_ARGS__)

#endif
