/* Pause and unpause through the Docker Engine API (docs.docker.com/reference/api/engine),
 * over the daemon's unix socket with libcurl: what the node agent does to
 * the containers Nomad's docker driver runs on its client (adopt.c). */
#ifndef SBX_WORKER_DOCKER_H
#define SBX_WORKER_DOCKER_H

#include <stdbool.h>
#include "err.h"

/* host: "unix:///PATH" (the daemon's socket; DOCKER_HOST's form). */
#define DOCKER_TIMEOUT_MS 10000

/* POST /containers/NAME/pause (true) or /unpause: freezes or thaws every
 * process of the container (for runsc: `runsc pause`, the whole sandbox).
 * Done already (409: already paused / not paused) is success. A missing
 * container is 404; an unreachable daemon 503. */
int docker_pause(const char *host, const char *name, bool pause, sbx_err *err);

#endif
