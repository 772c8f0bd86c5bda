#include "config.h"
#include <stdio.h>
#include <string.h>
#include "cron.h"

static const struct {
	const char *name;
	int lo, hi;
} fields[5] = { { "minute", 0, 59 }, { "hour", 0, 23 }, { "day of month", 1, 31 }, { "month", 1, 12 },
		{ "day of week", 0, 7 } };

/* A decimal number of at most 3 digits at *p; -1 when there is none. */
static int number(const char **p)
{
	int v = 0, n = 0;

	while (**p >= '0' && **p <= '9' && n < 3) {
		v = v * 10 + (**p - '0');
		(*p)++;
		n++;
	}
	return n && !(**p >= '0' && **p <= '9') ? v : -1;
}

/* One field (the text up to its end) into bits; *any when it is `*`. */
static int field(int f, const char *s, size_t len, uint64_t *bits, bool *any, sbx_err *err)
{
	char buf[SBX_CRON_MAX + 1];
	char *save = NULL, *item;
	int lo = fields[f].lo, hi = fields[f].hi;

	*bits = 0;
	*any = len == 1 && s[0] == '*';
	memcpy(buf, s, len);
	buf[len] = 0;
	if (!len || buf[0] == ',' || buf[len - 1] == ',' || strstr(buf, ",,"))
		goto bad;
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		const char *p = item;
		int a, b, step = 1;

		if (*p == '*') {
			a = lo;
			b = hi;
			p++;
		} else {
			if ((a = number(&p)) < 0)
				goto bad;
			b = a;
			if (*p == '-') {
				p++;
				if ((b = number(&p)) < 0)
					goto bad;
			}
		}
		if (*p == '/') {
			p++;
			if ((step = number(&p)) < 1)
				goto bad;
		}
		if (*p || a < lo || b > hi || a > b)
			goto bad;
		for (int v = a; v <= b; v += step)
			*bits |= 1ULL << v;
	}
	return 0;
bad:
	return sbx_err_set(err, 400, "invalid_field", "snapshotFrequency: bad %s field '%.*s' (allowed %d-%d)",
			   fields[f].name, (int)(len > 32 ? 32 : len), s, lo, hi);
}

int sbx_cron_parse(const char *expr, sbx_cron *c, sbx_err *err)
{
	const char *p = expr;
	uint64_t bits[5];
	bool any[5];
	int f = 0;

	memset(c, 0, sizeof(*c));
	if (!expr || strlen(expr) > SBX_CRON_MAX)
		return sbx_err_set(err, 400, "invalid_field", "snapshotFrequency must be a 5-field cron expression");
	while (*p == ' ')
		p++;
	while (*p) {
		size_t len = strcspn(p, " ");
		if (f == 5)
			return sbx_err_set(err, 400, "invalid_field",
					   "snapshotFrequency must have exactly 5 fields (minute hour day month weekday)");
		if (field(f, p, len, &bits[f], &any[f], err) < 0)
			return -1;
		f++;
		p += len;
		while (*p == ' ')
			p++;
	}
	if (f != 5)
		return sbx_err_set(err, 400, "invalid_field",
				   "snapshotFrequency must have exactly 5 fields (minute hour day month weekday)");
	c->minute = bits[0];
	c->hour = (uint32_t)bits[1];
	c->dom = (uint32_t)bits[2];
	c->month = (uint32_t)bits[3];
	/* 7 is Sunday too */
	c->dow = (uint8_t)((bits[4] & 0x7f) | (bits[4] >> 7 & 1));
	c->dom_any = any[2];
	c->dow_any = any[4];
	if (sbx_cron_next(c, 0) < 0)
		return sbx_err_set(err, 400, "invalid_field", "snapshotFrequency never fires");
	return 0;
}

static bool day_fires(const sbx_cron *c, const struct tm *tm)
{
	bool dom = c->dom >> tm->tm_mday & 1, dow = c->dow >> tm->tm_wday & 1;

	if (c->dom_any || c->dow_any)
		return dom && dow;
	return dom || dow;
}

time_t sbx_cron_next(const sbx_cron *c, time_t after)
{
	/* from 1970 (validation) or from `after`: five years of days at most */
	time_t t = after - after % 60 + 60;
	struct tm tm;

	for (int days = 0; days <= 5 * 366 + 1;) {
		if (!gmtime_r(&t, &tm))
			return -1;
		if (!(c->month >> (tm.tm_mon + 1) & 1) || !day_fires(c, &tm)) {
			/* the next day at 00:00 */
			t += (time_t)(24 * 3600 - tm.tm_hour * 3600 - tm.tm_min * 60 - tm.tm_sec);
			days++;
			continue;
		}
		if (!(c->hour >> tm.tm_hour & 1)) {
			t += (time_t)(3600 - tm.tm_min * 60 - tm.tm_sec);
			if (tm.tm_hour == 23)
				days++;
			continue;
		}
		if (!(c->minute >> tm.tm_min & 1)) {
			t += 60 - tm.tm_sec;
			if (tm.tm_hour == 23 && tm.tm_min == 59)
				days++;
			continue;
		}
		return t;
	}
	return -1;
}
