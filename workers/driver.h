/* Drivers decide where a sandbox runs (STYLE.md: a struct of function
 * pointers; a new driver is one new file). `local` runs it on this
 * machine's node agent; `nomad` submits a Nomad job per sandbox.
 * Both are called by the provisioner and the reaper with the sandbox's
 * record; both are idempotent for destroy. */
#ifndef SBX_WORKER_DRIVER_H
#define SBX_WORKER_DRIVER_H

#include <libpq-fe.h>
#include <stdbool.h>
#include "db.h"
#include "err.h"
#include "id.h"
#include <jansson.h>
#include "mq.h"
#include "msg.h"
#include "settings.h"

/* What a driver needs to know of a sandbox (read from its record). */
struct sandbox_rec {
	char id[SBX_ID_LEN + 1];
	char placement_id[SBX_ID_LEN + 1]; /* what names it on its node */
	char template[65];
	char node_id[256];
	int cpu, memory_mb, disk_gb;
	char *env_json; /* {"K":"V",...}, malloc'd */
	/* its attached volume ("" none): id, where inside, size, and whether
	 * this sandbox made it (persistent: true), so its node makes the image */
	char volume_id[SBX_ID_LEN + 1];
	char mount_path[256];
	int volume_gb;
	bool volume_create;
	char volume_node[256]; /* the node holding its image */
	char egress_mode[16];    /* deny_all | open | restricted */
	char *egress_allow_json; /* ["entry",...], malloc'd */
	/* fromSnapshot: the snapshot's image (sbx/snapshots/ID@DIGEST), "" none */
	char image[128];
	char from_snapshot[SBX_ID_LEN + 1];
};

struct placement {
	char node_id[256];
	char container_id[80];
	char placement_id[SBX_ID_LEN + 1]; /* the record's, or a warm pool member's */
};

struct driver;

struct driver_ops {
	const char *name;
	int (*start)(struct driver *d, const struct sandbox_rec *s, struct placement *out, sbx_err *err);
	int (*destroy)(struct driver *d, const struct sandbox_rec *s, sbx_err *err);
	/* optional: the reaper's pass over what the driver placed elsewhere
	 * (needs d->db); NULL: nothing beyond the records */
	void (*reap)(struct driver *d);
};

struct driver {
	const struct driver_ops *ops;
	const sbx_config *cfg;
	sbx_mq *rpc; /* a connection of its own for requests to nodes */
	sbx_db *db;  /* the caller's, for drivers that note their placement on the record */
};

extern const struct driver_ops driver_local_ops;
extern const struct driver_ops driver_nomad_ops;

struct sbx_reply;
/* One request to a node agent (its queue sbx.node.<node_id>) and its
 * {ok, error, code, extra...} reply, within timeout_ms. */
int driver_node_call(struct driver *d, const char *node_id, enum sbx_msg_kind k, json_t *body, int timeout_ms,
		     const char *const *extra, struct sbx_reply *rep, sbx_err *err);

/* Picks the driver the `driver` setting names (local or nomad). */
int driver_init(struct driver *d, const sbx_config *cfg, sbx_err *err);
void driver_fini(struct driver *d);

/* Loads a record by id (any organisation: workers act for the system). */
int sandbox_rec_load(sbx_db *db, const char *id, struct sandbox_rec *out, char *status, size_t stsz,
		     sbx_err *err);
void sandbox_rec_free(struct sandbox_rec *s);

#endif
