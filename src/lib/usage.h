/* What an organisation used in a window, and what it cost: sandbox-seconds
 * by size (CPU and memory), exec count and time, priced by the operator's
 * settings. One query, shared by GET /usage, sbx-admin usage and the
 * spending limit that create checks. */
#ifndef SBX_USAGE_H
#define SBX_USAGE_H

#include <jansson.h>

#include "db.h"
#include "err.h"
#include "settings.h"

/* from/to: RFC 3339 times (NULL: the start of this month UTC / now). 400
 * "invalid_query" when one is not a time or from is after to. *out is the
 * usage object (doc/operations.md, Usage). */
int sbx_usage(sbx_db *db, const sbx_config *cfg, const char *org_id, const char *from, const char *to,
	      json_t **out, sbx_err *err);
/* This month's cost so far in cents (fractional). */
int sbx_usage_month_cents(sbx_db *db, const sbx_config *cfg, const char *org_id, double *cents, sbx_err *err);
/* True when s is an RFC 3339 date-time (or a plain YYYY-MM-DD date). */
bool sbx_usage_time_valid(const char *s);

#endif
