/* Proves: the error table gives each code the status API.md's conventions
 * ask for (resource exhaustion 429 with Retry-After, a dead or failed
 * sandbox 503, busy 409, unknown codes 500), errno values become the codes
 * doc/internal-protocol.md lists, and sbx-init's ERROR texts are told
 * apart (cwd missing, out of processes, anything else). */
#include "config.h"
#include <errno.h>
#include <string.h>
#include "errcode.h"
#include "../tap.h"

static const char *exec_code(const char *s)
{
	return sbx_exec_error_code(s, strlen(s));
}

int main(void)
{
	sbx_err err = SBX_ERR_INIT;

	is_int(sbx_code_http("not_found"), 404, "not_found is 404");
	is_int(sbx_code_http("not_ready"), 400, "not_ready (wrong state) is 400");
	is_int(sbx_code_http("exec_failed"), 400, "exec_failed (command not found...) stays 400");
	is_int(sbx_code_http("cwd_missing"), 400, "cwd_missing is 400");
	is_int(sbx_code_http("too_large"), 413, "too_large is 413");
	is_int(sbx_code_http("no_space"), 413, "no_space is 413");
	is_int(sbx_code_http("busy"), 409, "busy (EBUSY, EAGAIN of a full stdin) is 409");
	is_int(sbx_code_http("resource_exhausted"), 429, "resource_exhausted is 429");
	ok(sbx_code_retry_after("resource_exhausted") > 0, "resource_exhausted carries a Retry-After");
	is_int(sbx_code_retry_after("not_found"), 0, "not_found carries no Retry-After");
	is_int(sbx_code_http("sandbox_dead"), 503, "sandbox_dead is 503");
	is_int(sbx_code_http("sandbox_failed"), 503, "sandbox_failed is 503");
	is_int(sbx_code_http("internal"), 500, "internal is 500");
	is_int(sbx_code_http("no_such_code"), 500, "an unknown code is 500");
	is_int(sbx_code_http(NULL), 500, "no code is 500");
	is_int(sbx_code_retry_after(NULL), 0, "no code: no Retry-After");

	is_int(sbx_err_code(&err, "sandbox_dead", "the sandbox died: %s", "oom"), -1, "sbx_err_code returns -1");
	is_int(err.http, 503, "sbx_err_code takes the status from the table");
	is_str(err.code, "sandbox_dead", "sbx_err_code keeps the code");
	is_str(err.msg, "the sandbox died: oom", "sbx_err_code formats the message (the reason stays in it)");
	sbx_err_code(&err, "whatever", "%s", "100%s");
	is_int(err.http, 500, "sbx_err_code with an unknown code is 500");
	is_str(err.msg, "100%s", "a %% in an argument is copied verbatim");
	is_int(sbx_err_code(NULL, "busy", "x"), -1, "sbx_err_code(NULL) returns -1 without crashing");

	is_str(sbx_errno_code(ENOENT), "not_found", "ENOENT -> not_found");
	is_str(sbx_errno_code(ESRCH), "not_found", "ESRCH (unknown pid) -> not_found");
	is_str(sbx_errno_code(ENOTDIR), "not_a_directory", "ENOTDIR -> not_a_directory");
	is_str(sbx_errno_code(EEXIST), "exists", "EEXIST -> exists");
	is_str(sbx_errno_code(ENOSPC), "no_space", "ENOSPC -> no_space");
	is_str(sbx_errno_code(EDQUOT), "no_space", "EDQUOT -> no_space");
	is_str(sbx_errno_code(EFBIG), "too_large", "EFBIG -> too_large");
	is_str(sbx_errno_code(ENAMETOOLONG), "too_large", "ENAMETOOLONG -> too_large");
	is_str(sbx_errno_code(EISDIR), "is_a_directory", "EISDIR -> is_a_directory");
	is_str(sbx_errno_code(ENOTEMPTY), "not_empty", "ENOTEMPTY -> not_empty");
	is_str(sbx_errno_code(EACCES), "permission_denied", "EACCES -> permission_denied");
	is_str(sbx_errno_code(EROFS), "permission_denied", "EROFS -> permission_denied");
	is_str(sbx_errno_code(EINVAL), "invalid", "EINVAL -> invalid");
	is_str(sbx_errno_code(ELOOP), "invalid", "ELOOP -> invalid");
	is_str(sbx_errno_code(EPIPE), "stdin_closed", "EPIPE -> stdin_closed");
	is_str(sbx_errno_code(EAGAIN), "busy", "EAGAIN -> busy");
	is_str(sbx_errno_code(EBUSY), "busy", "EBUSY -> busy (was internal: a 500)");
	is_str(sbx_errno_code(EIO), "internal", "EIO -> internal");
	is_str(sbx_errno_code(0), "internal", "0 -> internal");
	is_int(sbx_code_http(sbx_errno_code(EBUSY)), 409, "EBUSY ends as 409");

	is_str(exec_code("cwd does not exist: /nope"), "cwd_missing", "'cwd does not exist' -> cwd_missing");
	is_str(exec_code("cannot start: fork: Resource temporarily unavailable"), "resource_exhausted",
	       "fork EAGAIN -> resource_exhausted");
	is_str(exec_code("cannot start: pipe: Too many open files"), "resource_exhausted",
	       "no pipes left -> resource_exhausted");
	is_str(exec_code("cannot start: out of memory"), "resource_exhausted", "out of memory -> resource_exhausted");
	is_str(exec_code("command not found: nope"), "exec_failed", "command not found -> exec_failed");
	is_str(exec_code("permission denied: /etc/passwd"), "exec_failed", "not executable -> exec_failed");
	is_str(exec_code("cwd does"), "exec_failed", "a cut-off prefix is not a match");
	is_str(sbx_exec_error_code("cwd does not exist", 8), "exec_failed", "only len bytes are looked at");
	is_str(exec_code(""), "exec_failed", "an empty text -> exec_failed");
	is_int(sbx_code_http(exec_code("cannot start: fork: Resource temporarily unavailable")), 429,
	       "an exec that could not fork ends as 429");
	return done_testing();
}
