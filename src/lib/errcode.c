#include "config.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "cleanup.h"
#include "errcode.h"

static const struct {
	const char *code;
	int http;
	int retry_after; /* seconds; 0: no Retry-After */
} codes[] = {
	{ "not_found", 404, 0 },
	/* the request does not fit what is inside the sandbox */
	{ "cwd_missing", 400, 0 },
	{ "not_a_directory", 400, 0 },
	{ "is_a_directory", 400, 0 },
	{ "exists", 400, 0 },
	{ "not_empty", 400, 0 },
	{ "invalid", 400, 0 },
	{ "permission_denied", 400, 0 },
	{ "exec_failed", 400, 0 },
	{ "stdin_closed", 400, 0 },
	{ "broken_pipe", 400, 0 },
	{ "no_terminal", 400, 0 },
	/* the sandbox is in a state that cannot run it (the message names it) */
	{ "not_ready", 400, 0 },
	{ "busy", 409, 0 },
	{ "no_space", 413, 0 },
	{ "too_large", 413, 0 },
	/* out of processes or memory inside: it may pass, so try again later */
	{ "resource_exhausted", 429, 5 },
	/* the sandbox cannot serve any more: not the caller's fault */
	{ "sandbox_dead", 503, 0 },
	/* sbx-init did not answer in time (stopped or hung inside), or the
	 * node agent restarted under the op: try again shortly */
	{ "sandbox_unresponsive", 503, 2 },
	{ "node_restarted", 503, 1 },
	{ "sandbox_failed", 503, 0 },
	{ "internal", 500, 0 },
};

static int find(const char *code)
{
	for (size_t i = 0; code && i < SBX_ARRAY_LEN(codes); i++)
		if (!strcmp(code, codes[i].code))
			return (int)i;
	return -1;
}

int sbx_code_http(const char *code)
{
	int i = find(code);

	return i < 0 ? 500 : codes[i].http;
}

int sbx_code_retry_after(const char *code)
{
	int i = find(code);

	return i < 0 ? 0 : codes[i].retry_after;
}

int sbx_err_code(sbx_err *err, const char *code, const char *fmt, ...)
{
	char msg[sizeof(err->msg)];
	va_list ap;

	if (!err)
		return -1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return sbx_err_set(err, sbx_code_http(code), code, "%s", msg);
}

static const struct {
	int e;
	const char *code;
} errnos[] = {
	{ ENOENT, "not_found" },
	{ ESRCH, "not_found" }, /* an unknown or finished pid */
	{ ENOTDIR, "not_a_directory" },
	{ EEXIST, "exists" },
	{ ENOSPC, "no_space" },
	{ EDQUOT, "no_space" },
	{ EFBIG, "too_large" },
	{ E2BIG, "too_large" },
	{ ENAMETOOLONG, "too_large" },
	{ EISDIR, "is_a_directory" },
	{ ENOTEMPTY, "not_empty" },
	{ EACCES, "permission_denied" },
	{ EPERM, "permission_denied" },
	{ EROFS, "permission_denied" },
	{ EINVAL, "invalid" },
	{ ELOOP, "invalid" },
	{ EXDEV, "invalid" },
	{ ENOTTY, "no_terminal" }, /* a resize of a process started without a pty */
	{ EPIPE, "stdin_closed" },
	{ EAGAIN, "busy" }, /* a process's stdin buffer is full */
	{ EBUSY, "busy" },  /* e.g. deleting a mount point */
};

const char *sbx_errno_code(int e)
{
	for (size_t i = 0; i < SBX_ARRAY_LEN(errnos); i++)
		if (errnos[i].e == e)
			return errnos[i].code;
	return "internal";
}

/* The beginnings of sbx-init's ERROR texts (src/init: send_error) */
static const struct {
	const char *prefix;
	const char *code;
} exec_errors[] = {
	{ "cwd does not exist", "cwd_missing" },
	{ "cannot start: ", "resource_exhausted" }, /* pipe, fork (EAGAIN: RLIMIT_NPROC), memory */
};

const char *sbx_exec_error_code(const char *msg, size_t len)
{
	for (size_t i = 0; i < SBX_ARRAY_LEN(exec_errors); i++) {
		size_t pl = strlen(exec_errors[i].prefix);
		if (len >= pl && !memcmp(msg, exec_errors[i].prefix, pl))
			return exec_errors[i].code;
	}
	return "exec_failed";
}
