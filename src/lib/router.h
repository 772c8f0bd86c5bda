/* The public path router. It works on the raw REQUEST_URI (nginx passes
 * $request_uri untouched), so `..`, `//` and `%2F` are seen exactly as the
 * client sent them. Every path is served at the root and under /v1. */
#ifndef SBX_ROUTER_H
#define SBX_ROUTER_H

#include <stddef.h>
#include "err.h"
#include "id.h"

enum sbx_route {
	SBX_R_NONE = 0,
	SBX_R_HEALTHZ,          /* GET /healthz */
	SBX_R_METRICS,          /* GET /metrics */
	SBX_R_TEMPLATES,        /* GET /sandbox/templates */
	SBX_R_REGIONS,          /* GET /sandboxes/regions */
	SBX_R_SANDBOXES,        /* GET, POST /sandboxes */
	SBX_R_SANDBOX,          /* GET, DELETE /sandboxes/{id} */
	SBX_R_SANDBOX_WAIT,     /* GET /sandboxes/{id}/wait */
	SBX_R_SANDBOX_PAUSE,    /* POST /sandboxes/{id}/pause */
	SBX_R_SANDBOX_RESUME,   /* POST /sandboxes/{id}/resume */
	SBX_R_SANDBOX_TIMEOUT,  /* POST /sandboxes/{id}/timeout */
	SBX_R_SANDBOX_EGRESS,   /* PUT /sandboxes/{id}/egress */
	SBX_R_SANDBOX_STATS,    /* GET /sandboxes/{id}/stats */
	SBX_R_EXEC,             /* POST /sandboxes/{id}/exec */
	SBX_R_CODE,             /* POST /sandboxes/{id}/code */
	SBX_R_PROCESSES,        /* GET /sandboxes/{id}/processes */
	SBX_R_PROCESS,          /* GET /sandboxes/{id}/processes/{pid} */
	SBX_R_PROCESS_OUTPUT,   /* GET .../processes/{pid}/output */
	SBX_R_PROCESS_STDIN,    /* POST .../processes/{pid}/stdin */
	SBX_R_PROCESS_SIGNAL,   /* POST .../processes/{pid}/signal */
	SBX_R_PROCESS_RESIZE,   /* POST .../processes/{pid}/resize */
	SBX_R_FILES_BATCH,      /* POST /sandboxes/{id}/files/batch */
	SBX_R_FILE,             /* GET, PUT, DELETE /sandboxes/{id}/files/{path} */
	SBX_R_SANDBOX_SNAPSHOTS,/* GET, POST /sandboxes/{id}/snapshots */
	SBX_R_SNAPSHOTS,        /* GET /sandboxes/snapshots */
	SBX_R_SNAPSHOT,         /* DELETE /sandboxes/snapshots/{id} */
	SBX_R_VOLUMES,          /* GET, POST /volumes */
	SBX_R_VOLUME,           /* GET, DELETE /volumes/{id} */
	SBX_R_USAGE,            /* GET /usage */
	SBX_R__COUNT
};

/* Bit per method, for the Allow header of a 405. */
#define SBX_M_GET    0x01u
#define SBX_M_POST   0x02u
#define SBX_M_PUT    0x04u
#define SBX_M_DELETE 0x08u
#define SBX_M_HEAD   0x10u

#define SBX_ROUTE_PATH_MAX 4096

struct sbx_route_match {
	enum sbx_route route;
	unsigned method;              /* SBX_M_* of the request */
	unsigned allowed;             /* methods the matched path accepts */
	char id[SBX_ID_LEN + 1];      /* sandbox, snapshot or volume id */
	long pid;                     /* process id for /processes/{pid} */
	char path[SBX_ROUTE_PATH_MAX];/* files/{path}: decoded, always starting with '/' */
	const char *query;            /* raw query string (after '?'), "" when none */
	int v1;                       /* came in under /v1 */
};

/* Matches method + raw request URI. Returns 0 and fills m, or -1 with err:
 * 400 (bad id: "Invalid sandbox id" etc., bad path encoding, %2F or NUL in a
 * file path), 404 (no such path), 405 (path known, method not; m->allowed set). */
int sbx_route_match(const char *method, const char *request_uri, struct sbx_route_match *m,
		    sbx_err *err);
const char *sbx_route_name(enum sbx_route r);
/* "GET, POST" for an Allow header. */
void sbx_route_allow_header(unsigned allowed, char *out, size_t outsz);

#endif
