/* Error codes: the one table that says which HTTP status each stable error
 * code answers, and which code an errno from inside a sandbox becomes.
 * The node agent sends codes (doc/internal-protocol.md, `error` events);
 * the API turns them into statuses here, never in its own if-chains.
 *
 * Conventions (API.md): 400 the caller's request or the sandbox's state is
 * wrong; 404 not found; 409 busy with something else; 413 too large; 429
 * the sandbox is out of a resource for now (retry later, Retry-After);
 * 503 the sandbox cannot serve at all (dead, failed), with the reason. */
#ifndef SBX_ERRCODE_H
#define SBX_ERRCODE_H

#include <stddef.h>
#include "err.h"

/* The HTTP status of a code; 500 for NULL and for codes not in the table. */
int sbx_code_http(const char *code);
/* Seconds for a Retry-After header with this code; 0: none. */
int sbx_code_retry_after(const char *code);
/* sbx_err_set with the status the table gives `code`. Returns -1. */
int sbx_err_code(sbx_err *err, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The code of an errno that a file or process operation inside a sandbox
 * failed with; "internal" for anything not listed. */
const char *sbx_errno_code(int e);
/* The code of sbx-init's ERROR frame (an exec that did not start), from its
 * text: cwd_missing, resource_exhausted (sbx-init could not fork, make
 * pipes or allocate: the sandbox is out of processes or memory), else
 * exec_failed (command not found, not executable...). */
const char *sbx_exec_error_code(const char *msg, size_t len);

#endif
