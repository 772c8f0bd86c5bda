/* Proves: the five-field cron parser accepts `*`, numbers, ranges, steps
 * and lists within each field's range (7 is Sunday too) and refuses
 * everything else with a 400 naming the field (names, six fields, empty
 * items, out of range, reversed ranges, step 0, junk, a schedule that never
 * fires); the next firing time is right for plain, stepped and day-of-week
 * schedules, across month and year ends, and for the Vixie rule that a day
 * matching either restricted day field fires. */
#include "config.h"
#include <string.h>
#include <time.h>
#include "cron.h"
#include "../tap.h"

static time_t utc(int y, int mo, int d, int h, int mi)
{
	struct tm tm = { 0 };
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	return timegm(&tm);
}

static void good(const char *e)
{
	sbx_cron c;
	sbx_err err = SBX_ERR_INIT;
	ok(sbx_cron_parse(e, &c, &err) == 0, "'%s' is accepted", e);
	if (err.msg[0])
		diag("%s", err.msg);
}

static void bad(const char *e, const char *what)
{
	sbx_cron c;
	sbx_err err = SBX_ERR_INIT;
	int r = sbx_cron_parse(e, &c, &err);
	ok(r == -1 && err.http == 400 && strstr(err.msg, what), "'%s' is a 400 about %s", e ? e : "(null)", what);
	if (r == 0 || !strstr(err.msg, what))
		diag("got %d: %s", r, err.msg);
}

static void next_is(const char *e, time_t after, time_t want, const char *what)
{
	sbx_cron c;
	sbx_err err = SBX_ERR_INIT;
	time_t got = sbx_cron_parse(e, &c, &err) == 0 ? sbx_cron_next(&c, after) : -2;
	ok(got == want, "'%s': %s", e, what);
	if (got != want)
		diag("got %lld, want %lld (%s)", (long long)got, (long long)want, err.msg);
}

int main(void)
{
	good("* * * * *");
	good("*/5 * * * *");
	good("0 3 * * 1-5");
	good("0,15,30,45 0-23/2 1 1,6,12 *");
	good("  30  4   *  *  7 ");
	good("0 0 29 2 *");
	bad(NULL, "5-field");
	bad("", "5 fields");
	bad("* * * *", "5 fields");
	bad("* * * * * *", "5 fields");
	bad("60 * * * *", "minute");
	bad("* 24 * * *", "hour");
	bad("* * 0 * *", "day of month");
	bad("* * 32 * *", "day of month");
	bad("* * * 13 *", "month");
	bad("* * * * 8", "day of week");
	bad("* * * jan *", "month");
	bad("* * * * mon", "day of week");
	bad("5-1 * * * *", "minute");
	bad("*/0 * * * *", "minute");
	bad("1,,2 * * * *", "minute");
	bad("1, * * * *", "minute");
	bad("-1 * * * *", "minute");
	bad("1-2-3 * * * *", "minute");
	bad("0001 * * * *", "minute");
	bad("@daily", "minute");
	bad("0 0 30 2 *", "never fires");

	next_is("* * * * *", utc(2026, 11, 30, 22, 10) + 17, utc(2026, 11, 30, 22, 11), "the next minute");
	next_is("*/15 * * * *", utc(2026, 11, 30, 22, 10), utc(2026, 11, 30, 22, 15), "a step");
	next_is("*/15 * * * *", utc(2026, 11, 30, 22, 15), utc(2026, 11, 30, 22, 30), "strictly after");
	next_is("0 3 * * *", utc(2026, 12, 31, 4, 0), utc(2027, 1, 1, 3, 0), "across the year's end");
	next_is("30 8 * * 1-5", utc(2026, 11, 28, 9, 0), utc(2026, 11, 30, 8, 30), "Saturday -> Monday");
	next_is("0 0 * * 7", utc(2026, 11, 30, 0, 0), utc(2026, 12, 6, 0, 0), "7 is Sunday");
	next_is("0 0 1 * 1", utc(2026, 11, 30, 0, 0), utc(2026, 12, 1, 0, 0),
		"both days restricted: either fires (the 1st, a Tuesday)");
	next_is("0 0 29 2 *", utc(2026, 3, 1, 0, 0), utc(2028, 2, 29, 0, 0), "the next leap day");
	return done_testing();
}
