/* Five-field cron schedules (automatic snapshots, API.md "Snapshots"):
 * "minute hour day-of-month month day-of-week", each field `*`, a number,
 * a range `a-b`, any of them with a step `/n`, or a comma list of those.
 * Numbers only (no names, no @macros); day-of-week 0-7, both 0 and 7 are
 * Sunday. As in Vixie cron, when both days are restricted a day matching
 * either one fires. Times are UTC. */
#ifndef SBX_CRON_H
#define SBX_CRON_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include "err.h"

#define SBX_CRON_MAX 128 /* longest expression accepted */

typedef struct sbx_cron {
	uint64_t minute; /* bit i: minute i fires */
	uint32_t hour, dom, month; /* dom bits 1..31, month bits 1..12 */
	uint8_t dow;     /* bits 0..6, Sunday 0 */
	bool dom_any, dow_any;
} sbx_cron;

/* Parses expr; -1 with a 400 naming the field otherwise. A schedule that
 * never fires (February 30th) is refused too. */
int sbx_cron_parse(const char *expr, sbx_cron *c, sbx_err *err);
/* The first minute strictly after `after` that fires (seconds zero); -1
 * when none within five years. */
time_t sbx_cron_next(const sbx_cron *c, time_t after);

#endif
