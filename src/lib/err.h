/* One error shape: fallible functions return < 0 and fill a trailing sbx_err.
 * `http` is the HTTP status the error maps to (0 when it does not), `code` a
 * stable machine-readable string, `msg` the user-facing (or log) message. */
#ifndef SBX_ERR_H
#define SBX_ERR_H

#include <stdarg.h>

typedef struct sbx_err {
	int http;
	char code[40];
	char msg[512];
} sbx_err;

#define SBX_ERR_INIT { 0, "", "" }

/* Fill err and return -1. */
int sbx_err_set(sbx_err *err, int http, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Same, appending ": strerror(errno)". */
int sbx_err_sys(sbx_err *err, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Prefix context to the message ("context: old message"); returns -1. */
int sbx_err_ctx(sbx_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbx_err_clear(sbx_err *err);

#endif
