/* Proves: the usage window's times are accepted exactly when they are RFC
 * 3339 date-times (Z or an offset, optional fraction) or plain dates, so a
 * bad one is the caller's 400 before any query. */
#include "config.h"
#include <stdbool.h>
#include "usage.h"
#include "../tap.h"

int main(void)
{
	static const char *const good[] = { "2026-11-01", "2026-11-01T00:00:00Z", "2026-11-30T18:38:59.123Z",
					    "2026-11-30T18:38:59+01:00", "2026-11-30 18:38:59-05:30", "2026-11-30t01:02:03z" };
	static const char *const bad[] = { "", "yesterday", "2026-11", "2026-11-1", "2026-11-01T", "2026-11-01T00:00Z",
					   "2026-11-01T00:00:00", "2026-11-01T00:00:00.Z", "2026-11-01T00:00:00+0100",
					   "2026-11-01T00:00:00Z junk", "2026/11/01", "2026-11-01T00:00:00+01:00x" };

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ok(sbx_usage_time_valid(good[i]), "accepted: '%s'", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(!sbx_usage_time_valid(bad[i]), "refused: '%s'", bad[i]);
	return done_testing();
}
