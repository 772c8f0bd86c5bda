/* Proves: the sandbox statuses are sql/001_init.sql's enum (names round
 * trip, nothing else parses), the transition table allows exactly the
 * changes the code makes (create: starting -> ready/failed/destroyed; a
 * live sandbox -> failed/destroyed; failed -> destroyed; destroyed is
 * final; no status goes back to starting or to itself), a guard built for a
 * change the table does not allow is refused, and an allowed one becomes
 * the Postgres array literal the statements compare with. */
#include "config.h"
#include <string.h>
#include "sandbox_state.h"
#include "../tap.h"

#define B SBX_SB_BIT

int main(void)
{
	static const char *const sql_enum[] = { "starting", "ready", "pausing", "paused", "resuming", "failed",
						"destroyed" };
	static const int allowed[][2] = {
		{ SBX_SB_STARTING, SBX_SB_READY },	{ SBX_SB_STARTING, SBX_SB_FAILED },
		{ SBX_SB_STARTING, SBX_SB_DESTROYED },	{ SBX_SB_READY, SBX_SB_FAILED },
		{ SBX_SB_READY, SBX_SB_DESTROYED },	{ SBX_SB_PAUSING, SBX_SB_FAILED },
		{ SBX_SB_PAUSING, SBX_SB_DESTROYED },	{ SBX_SB_PAUSED, SBX_SB_FAILED },
		{ SBX_SB_PAUSED, SBX_SB_DESTROYED },	{ SBX_SB_RESUMING, SBX_SB_FAILED },
		{ SBX_SB_RESUMING, SBX_SB_DESTROYED },	{ SBX_SB_FAILED, SBX_SB_DESTROYED },
		/* pause and resume, each undone when it cannot be done */
		{ SBX_SB_READY, SBX_SB_PAUSING },	{ SBX_SB_PAUSING, SBX_SB_PAUSED },
		{ SBX_SB_PAUSING, SBX_SB_READY },	{ SBX_SB_PAUSED, SBX_SB_RESUMING },
		{ SBX_SB_RESUMING, SBX_SB_READY },	{ SBX_SB_RESUMING, SBX_SB_PAUSED },
	};
	sbx_err err = SBX_ERR_INIT;
	char g[80];
	int n = 0;

	is_int(SBX_SB_NSTATUS, (int)(sizeof(sql_enum) / sizeof(sql_enum[0])), "as many statuses as the SQL enum");
	for (int s = 0; s < SBX_SB_NSTATUS; s++) {
		is_str(sbx_sb_status_name((enum sbx_sb_status)s), sql_enum[s], "status %d is '%s'", s, sql_enum[s]);
		is_int(sbx_sb_status_parse(sql_enum[s]), s, "'%s' parses back", sql_enum[s]);
	}
	is_int(sbx_sb_status_parse("destroying"), -1, "'destroying' is not a status (it is an intent)");
	is_int(sbx_sb_status_parse("Ready"), -1, "names are case-sensitive");
	is_int(sbx_sb_status_parse(NULL), -1, "NULL parses to -1");
	is_str(sbx_sb_status_name(SBX_SB_NSTATUS), "", "an out-of-range status has no name");

	for (int from = 0; from < SBX_SB_NSTATUS; from++)
		for (int to = 0; to < SBX_SB_NSTATUS; to++) {
			int want = 0;
			for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
				want |= allowed[i][0] == from && allowed[i][1] == to;
			n += sbx_sb_transition_ok((enum sbx_sb_status)from, (enum sbx_sb_status)to) == (want != 0);
		}
	is_int(n, SBX_SB_NSTATUS * SBX_SB_NSTATUS, "the table allows exactly the listed changes, no other");
	ok(!sbx_sb_transition_ok(SBX_SB_DESTROYED, SBX_SB_READY), "destroyed -> ready is refused");
	ok(!sbx_sb_transition_ok(SBX_SB_FAILED, SBX_SB_READY), "failed -> ready is refused (never recreated)");
	ok(!sbx_sb_transition_ok(SBX_SB_READY, SBX_SB_STARTING), "ready -> starting is refused");
	ok(!sbx_sb_transition_ok(SBX_SB_READY, SBX_SB_READY), "a status does not follow itself");
	ok(!sbx_sb_transition_ok(SBX_SB_NSTATUS, SBX_SB_READY), "an out-of-range status changes to nothing");

	ok(sbx_sb_settled(SBX_SB_READY) && sbx_sb_settled(SBX_SB_PAUSED) && sbx_sb_settled(SBX_SB_FAILED) &&
	   sbx_sb_settled(SBX_SB_DESTROYED), "a wait ends at ready, paused, failed, destroyed");
	ok(!sbx_sb_settled(SBX_SB_STARTING) && !sbx_sb_settled(SBX_SB_PAUSING) && !sbx_sb_settled(SBX_SB_RESUMING) &&
	   !sbx_sb_settled(-1), "and not at starting, pausing, resuming, or an unknown status");
	ok(sbx_sb_on_node(SBX_SB_READY) && sbx_sb_on_node(SBX_SB_PAUSING) && sbx_sb_on_node(SBX_SB_PAUSED) &&
	   sbx_sb_on_node(SBX_SB_RESUMING), "ready, pausing, paused, resuming have a sandbox on their node");
	ok(!sbx_sb_on_node(SBX_SB_STARTING) && !sbx_sb_on_node(SBX_SB_FAILED) && !sbx_sb_on_node(SBX_SB_DESTROYED) &&
	   !sbx_sb_on_node(-1), "starting, failed, destroyed (and unknown) do not");
	ok(!(SBX_SB_UNPLACED & B(SBX_SB_READY)) && (SBX_SB_UNPLACED & B(SBX_SB_STARTING)) &&
	   (SBX_SB_UNPLACED & B(SBX_SB_FAILED)), "unplaced (destroyed at once) is starting and failed");

	is_int(sbx_sb_guard(B(SBX_SB_STARTING), SBX_SB_READY, g, sizeof(g), &err), 0, "starting -> ready: a guard");
	is_str(g, "{starting}", "as an array literal");
	is_int(sbx_sb_guard(B(SBX_SB_STARTING) | B(SBX_SB_READY) | B(SBX_SB_PAUSING) | B(SBX_SB_PAUSED) |
				    B(SBX_SB_RESUMING),
			    SBX_SB_FAILED, g, sizeof(g), &err),
	       0, "every live status -> failed: a guard");
	is_str(g, "{starting,ready,pausing,paused,resuming}", "listing them in order");
	is_int(sbx_sb_guard(SBX_SB_UNPLACED, SBX_SB_DESTROYED, g, sizeof(g), &err), 0, "unplaced -> destroyed");
	is_str(g, "{starting,failed}", "is {starting,failed}");

	strcpy(g, "untouched");
	is_int(sbx_sb_guard(B(SBX_SB_FAILED), SBX_SB_READY, g, sizeof(g), &err), -1, "failed -> ready is refused");
	is_str(err.code, "bad_transition", "as bad_transition");
	is_int(err.http, 500, "a 500 (a bug, never the caller's)");
	like(err.msg, "failed -> ready", "naming the change");
	is_int(sbx_sb_guard(B(SBX_SB_STARTING) | B(SBX_SB_DESTROYED), SBX_SB_DESTROYED, g, sizeof(g), &err), -1,
	       "one refused status in the set refuses the whole guard");
	is_int(sbx_sb_guard(0, SBX_SB_FAILED, g, sizeof(g), &err), -1, "an empty set is refused");
	is_int(sbx_sb_guard(B(SBX_SB_NSTATUS), SBX_SB_FAILED, g, sizeof(g), &err), -1, "an unknown status is refused");
	is_int(sbx_sb_guard(B(SBX_SB_STARTING) | B(SBX_SB_READY), SBX_SB_FAILED, g, 8, &err), -1,
	       "a guard that does not fit is refused, not cut");
	return done_testing();
}
