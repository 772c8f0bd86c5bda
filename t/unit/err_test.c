/* Proves: sbx_err_set/sys/ctx fill status, code and message as documented,
 * return -1, tolerate a NULL err, and truncate over-long input safely (the
 * message stays NUL-terminated inside its buffer, the code likewise). */
#include "config.h"
#include <errno.h>
#include <string.h>
#include "err.h"
#include "../tap.h"

int main(void)
{
	sbx_err err = SBX_ERR_INIT;
	char big[2000];
	int r;

	r = sbx_err_set(&err, 404, "not_found", "Sandbox %s not found", "abc");
	is_int(r, -1, "sbx_err_set returns -1");
	is_int(err.http, 404, "sbx_err_set stores the HTTP status");
	is_str(err.code, "not_found", "sbx_err_set stores the code");
	is_str(err.msg, "Sandbox abc not found", "sbx_err_set formats the message");

	sbx_err_set(&err, 500, NULL, "x");
	is_str(err.code, "internal", "a NULL code becomes 'internal'");

	errno = ENOENT;
	r = sbx_err_sys(&err, "io", "open %s", "/nope");
	is_int(r, -1, "sbx_err_sys returns -1");
	is_int(err.http, 500, "sbx_err_sys is a 500");
	is_str(err.msg, "open /nope: No such file or directory", "sbx_err_sys appends strerror(errno)");
	is_int(errno, ENOENT, "sbx_err_sys keeps errno");

	sbx_err_set(&err, 400, "bad", "inner");
	r = sbx_err_ctx(&err, "outer %d", 1);
	is_int(r, -1, "sbx_err_ctx returns -1");
	is_str(err.msg, "outer 1: inner", "sbx_err_ctx prefixes context");
	is_int(err.http, 400, "sbx_err_ctx keeps the status");
	is_str(err.code, "bad", "sbx_err_ctx keeps the code");
	sbx_err_ctx(&err, "top");
	is_str(err.msg, "top: outer 1: inner", "context stacks outermost first");

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	sbx_err_set(&err, 400, big, "%s", big);
	is_int(strlen(err.msg), sizeof(err.msg) - 1, "an over-long message is truncated to the buffer");
	is_int(strlen(err.code), sizeof(err.code) - 1, "an over-long code is truncated to the buffer");

	errno = EACCES;
	sbx_err_sys(&err, "io", "%s", big);
	is_int(strlen(err.msg), sizeof(err.msg) - 1, "sbx_err_sys with an over-long message stays in bounds");

	sbx_err_set(&err, 400, "bad", "%s", big);
	sbx_err_ctx(&err, "%s", big);
	is_int(strlen(err.msg), sizeof(err.msg) - 1, "sbx_err_ctx with over-long parts stays in bounds");
	ok(err.msg[0] == 'a', "the truncated context message starts with the context");

	sbx_err_set(&err, 400, "bad", "short");
	sbx_err_ctx(&err, "%s", big);
	ok(strlen(err.msg) == sizeof(err.msg) - 1 || strstr(err.msg, ": short") != NULL,
	   "a long context with a short message is still bounded");

	is_int(sbx_err_set(NULL, 400, "x", "y"), -1, "sbx_err_set(NULL) returns -1 without crashing");
	is_int(sbx_err_sys(NULL, "x", "y"), -1, "sbx_err_sys(NULL) returns -1 without crashing");
	is_int(sbx_err_ctx(NULL, "y"), -1, "sbx_err_ctx(NULL) returns -1 without crashing");

	sbx_err_clear(&err);
	ok(err.http == 0 && !err.code[0] && !err.msg[0], "sbx_err_clear empties status, code and message");
	sbx_err_clear(NULL);
	ok(1, "sbx_err_clear(NULL) does not crash");

	/* a % in user data passed as an argument must not be interpreted */
	sbx_err_set(&err, 400, "bad", "%s", "100%s%n");
	is_str(err.msg, "100%s%n", "user data passed via %%s is copied verbatim");
	return done_testing();
}
