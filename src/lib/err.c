#include "config.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "err.h"

static void set_code(sbx_err *err, const char *code)
{
	snprintf(err->code, sizeof(err->code), "%s", code ? code : "internal");
}

int sbx_err_set(sbx_err *err, int http, const char *code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return -1;
	err->http = http;
	set_code(err, code);
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -1;
}

int sbx_err_sys(sbx_err *err, const char *code, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	size_t n;

	if (!err)
		return -1;
	err->http = 500;
	set_code(err, code);
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	n = strlen(err->msg);
	snprintf(err->msg + n, sizeof(err->msg) - n, ": %s", strerror(saved));
	errno = saved;
	return -1;
}

int sbx_err_ctx(sbx_err *err, const char *fmt, ...)
{
	char prefix[256], old[sizeof(err->msg)];
	va_list ap;

	if (!err)
		return -1;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old);
	return -1;
}

void sbx_err_clear(sbx_err *err)
{
	if (!err)
		return;
	err->http = 0;
	err->code[0] = 0;
	err->msg[0] = 0;
}
