/* The roles of sbx-worker. Each runs in its own child of the master
 * (src/lib/daemon.c), one file per role; a role returns its exit status
 * and must return soon after sbx_child_stop is set (drain). */
#ifndef SBX_WORKER_ROLES_H
#define SBX_WORKER_ROLES_H

#include "settings.h"

int provisioner_run(const sbx_config *cfg, int index, void *ctx);
int node_run(const sbx_config *cfg, int index, void *ctx);
int reaper_run(const sbx_config *cfg, int index, void *ctx);

/* node_id from the config, or the host name when it is empty. The string
 * is static and lives as long as the process. */
const char *worker_node_id(const sbx_config *cfg);

/* Sleeps up to ms, in short steps, returning early once sbx_child_stop is
 * set, so a draining child never waits out a whole back-off. */
void worker_sleep_ms(long ms);

/* The back-off between tries to reach RabbitMQ: the first try after a
 * failure comes WORKER_RETRY_MIN_MS later, each next one twice as late, up
 * to WORKER_RETRY_MAX_MS. The cap is short because a role that does not
 * consume serves nothing (a node agent's sandboxes get no exec): once the
 * broker is back, a role consumes again within the cap, however long the
 * broker was gone; a refused connect costs next to nothing. */
#define WORKER_RETRY_MIN_MS 500
#define WORKER_RETRY_MAX_MS 4000
long worker_retry_next(long ms);

/* Destroys a sandbox through the driver and records it (provisioner and
 * reaper share it). reason: destroy_reason to record when none is set. */
struct driver;
#include <jansson.h>
#include "db.h"
json_t *provisioner_destroy(sbx_db *db, struct driver *drv, const char *id, const char *reason);

#endif
