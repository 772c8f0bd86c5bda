/* Cleanup attributes: every local resource has an owner that releases it. */
#ifndef SBX_CLEANUP_H
#define SBX_CLEANUP_H

#include <stdlib.h>
#include <unistd.h>
#include <stdio.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void sbx_freep(void *p) { free(*(void **)p); }
static inline void sbx_closep(int *fd) { if (*fd >= 0) close(*fd); }
static inline void sbx_fclosep(FILE **f) { if (*f) fclose(*f); }

#define cleanup_free _cleanup_(sbx_freep)
#define cleanup_close _cleanup_(sbx_closep)
#define cleanup_fclose _cleanup_(sbx_fclosep)

/* Hand a resource over: the cleanup of the old variable then does nothing. */
static inline void *sbx_steal_ptr(void *pp)
{
	void **p = pp, *v = *p;
	*p = NULL;
	return v;
}
#define steal_ptr(p) sbx_steal_ptr(&(p))
static inline int sbx_steal_fd(int *fd) { int v = *fd; *fd = -1; return v; }

#define SBX_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
