/* libFuzzer target: a snapshotFrequency through sbx_cron_parse and
 * sbx_cron_next. Checks: a refusal is a 400 with a message; an accepted
 * schedule fires (parse refuses one that never does), its next time is a
 * whole minute after the given one, and that minute matches the schedule's
 * minute and hour bits. */
#include "config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cron.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(c) do { if (!(c)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sbx_err err = SBX_ERR_INIT;
	sbx_cron c;
	char *s;
	time_t after = 1800000000, t;
	struct tm tm;

	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = 0;
	if (sbx_cron_parse(s, &c, &err) < 0) {
		require(err.http == 400 && err.msg[0]);
	} else {
		require(c.minute && c.hour && c.month);
		t = sbx_cron_next(&c, after);
		if (t >= 0) {
			require(t > after && t % 60 == 0);
			require(gmtime_r(&t, &tm));
			require(c.minute >> tm.tm_min & 1);
			require(c.hour >> tm.tm_hour & 1);
			require(c.month >> (tm.tm_mon + 1) & 1);
		}
	}
	free(s);
	return 0;
}
