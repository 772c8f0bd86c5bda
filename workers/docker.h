/* A few calls of the Docker Engine API (docs.docker.com/reference/api/engine),
 * over the daemon's unix socket with libcurl: what the node agent needs of
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

/* POST /containers/NAME/exec and /exec/ID/start (detached), then its
 * /exec/ID/json until it ends (timeout_ms at most): 0 when it exited 0. */
int docker_exec(const char *host, const char *name, const char *const *argv, int timeout_ms, sbx_err *err);

/* What a snapshot of the container reads (one inspect of it, one of its
 * image): upper, its writable layer on the host (overlay2's UpperDir;
 * another storage driver is refused); base, its image as the registry names
 * it: of the image's RepoDigests the one REGISTRY/sbx/...@sha256:...,
 * without "REGISTRY/" (registry: HOST:PORT, as the image was pulled). */
int docker_layer(const char *host, const char *name, const char *registry, char *base, size_t bsz, char *upper,
		 size_t usz, sbx_err *err);

/* GET /containers/NAME/json within timeout_ms: the host pid of the
 * container's init (for runsc the sandbox's process: its cgroup and network
 * namespace are the sandbox's). A stopped container is 409, a missing one
 * 404. */
int docker_pid(const char *host, const char *name, int timeout_ms, long *pid, sbx_err *err);

#endif
