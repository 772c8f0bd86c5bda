/* The request bodies' field tables (bodies.h). Limits beyond a field's own
 * range (plan limits, what depends on the config) stay in the handlers. */
#include "config.h"
#include "bodies.h"
#include "cleanup.h"

#define BODY(name, spec, where_) \
	const struct api_body name = { spec, SBX_ARRAY_LEN(spec), where_ }

static const struct sbx_jfield create_spec[] = {
	{ "name", SBX_J_STRING, false, 1, 64 },
	{ "template", SBX_J_STRING, false, 1, 64 },
	{ "region", SBX_J_STRING, false, 1, 64 },
	{ "specs", SBX_J_OBJECT, false, 0, 0 },
	{ "autoDestroy", SBX_J_BOOL, false, 0, 0 },
	{ "destroyTimeout", SBX_J_STRING, false, 1, 8 },
	{ "oneShot", SBX_J_BOOL, false, 0, 0 },
	{ "egress", SBX_J_OBJECT, false, 0, 0 },
	{ "blockOutbound", SBX_J_BOOL, false, 0, 0 },
	{ "persistent", SBX_J_BOOL, false, 0, 0 },
	{ "persistentDiskGB", SBX_J_INT, false, 1, 100000 },
	{ "volumeId", SBX_J_STRING, false, 1, 64 },
	{ "mountPath", SBX_J_STRING, false, 1, 4096 },
	{ "fromSnapshot", SBX_J_STRING, false, 1, 64 },
	{ "snapshotMode", SBX_J_STRING, false, 1, 16 },
	{ "snapshotFrequency", SBX_J_STRING, false, 1, 128 },
	{ "env", SBX_J_STRMAP, false, 0, 100 },
	{ "metadata", SBX_J_STRMAP, false, 0, 50 },
	{ "timeout", SBX_J_INT, false, 60, 2592000 },
	/* the official SDKs send these two (a team is an organisation here) */
	{ "teamId", SBX_J_STRING, false, 1, 64 },
	{ "environmentId", SBX_J_STRING, false, 1, 64 },
};
BODY(api_create_body, create_spec, NULL);

static const struct sbx_jfield volume_spec[] = {
	{ "name", SBX_J_STRING, true, 1, 40 },
	{ "sizeGB", SBX_J_INT, true, 1, 100000 },
	{ "region", SBX_J_STRING, false, 1, 64 },
	{ "type", SBX_J_STRING, false, 1, 16 },
	/* may be null (the SDKs send it so) */
	{ "teamId", SBX_J_STRING, false, 1, 64 },
};
BODY(api_volume_body, volume_spec, NULL);

static const struct sbx_jfield snapshot_spec[] = {
	{ "name", SBX_J_STRING, true, 1, 40 },
};
BODY(api_snapshot_body, snapshot_spec, NULL);

static const struct sbx_jfield timeout_spec[] = {
	{ "timeout", SBX_J_INT, true, 60, 86400 },
};
BODY(api_timeout_body, timeout_spec, NULL);

static const struct sbx_jfield specs_spec[] = {
	{ "cpu", SBX_J_INT, false, 1, 2000 },
	{ "memory", SBX_J_INT, false, 1, 1048576 },
	{ "disk", SBX_J_INT, false, 1, 5 },
};
BODY(api_create_specs, specs_spec, "specs");

static const struct sbx_jfield egress_spec[] = {
	{ "mode", SBX_J_STRING, true, 1, 16 },
	{ "allow", SBX_J_ARRAY, false, 0, 50 },
};
BODY(api_create_egress, egress_spec, "egress");

static const struct sbx_jfield exec_spec[] = {
	{ "cmd", SBX_J_STRING, false, 1, 1048576 },
	{ "command", SBX_J_STRING, false, 1, 1048576 },
	{ "timeout_seconds", SBX_J_INT, false, 1, 3600 },
	{ "cwd", SBX_J_STRING, false, 1, 4096 },
	{ "env", SBX_J_STRMAP, false, 0, 200 },
	{ "stream", SBX_J_BOOL, false, 0, 0 },
	{ "stdin", SBX_J_STRING, false, 0, 0 },
	{ "stdin_encoding", SBX_J_STRING, false, 1, 16 },
	{ "background", SBX_J_BOOL, false, 0, 0 },
	{ "pty", SBX_J_OBJECT, false, 0, 0 },
};
BODY(api_exec_body, exec_spec, NULL);

/* 1..SBX_PTY_MAX (frame.h) */
static const struct sbx_jfield pty_spec[] = {
	{ "cols", SBX_J_INT, true, 1, 1000 },
	{ "rows", SBX_J_INT, true, 1, 1000 },
};
BODY(api_exec_pty, pty_spec, "pty");

static const struct sbx_jfield code_spec[] = {
	{ "language", SBX_J_STRING, true, 1, 16 },
	{ "code", SBX_J_STRING, true, 0, 1048576 },
	{ "timeout_seconds", SBX_J_INT, false, 1, 3600 },
	{ "cwd", SBX_J_STRING, false, 1, 4096 },
	{ "env", SBX_J_STRMAP, false, 0, 200 },
	{ "stream", SBX_J_BOOL, false, 0, 0 },
};
BODY(api_code_body, code_spec, NULL);

int api_body_check(const json_t *obj, const struct api_body *b, sbx_err *err)
{
	return sbx_json_check(obj, b->fields, b->n, b->where, err);
}
