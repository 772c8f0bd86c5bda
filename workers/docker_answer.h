/* What the node agent reads out of the Docker daemon's answers (docker.c)
 * and out of a container process's /proc/PID/cgroup: outside input, kept
 * apart from the HTTP calls so that it is tested and fuzzed on its own
 * (fuzz/fuzz_docker.c). Every function fills its buffers with
 * NUL-terminated text or fails with a 503 naming the container. */
#ifndef SBX_WORKER_DOCKER_ANSWER_H
#define SBX_WORKER_DOCKER_ANSWER_H

#include <jansson.h>
#include <stddef.h>
#include "err.h"

/* The "message" of an error answer (body: its bytes, NUL-terminated), or
 * its first bytes; on one line, at most sz - 1 bytes. */
const char *docker_message_of(const char *body, char *buf, size_t sz);

/* A container inspect: its writable layer (overlay2's UpperDir; another
 * storage driver is refused) and its image id ("sha256:" + 64 hex). */
int docker_layer_of(json_t *container, const char *name, char *upper, size_t usz, char *image_id, size_t isz,
		    sbx_err *err);

/* An image inspect: of its RepoDigests the one REGISTRY/sbx/...@sha256:...,
 * without "REGISTRY/" (registry: HOST:PORT, as the image was pulled). */
int docker_repo_digest_of(json_t *image, const char *registry, const char *name, char *base, size_t bsz,
			  sbx_err *err);

/* A container inspect: the host pid of its init (State.Pid; for runsc the
 * sandbox's own process), when State.Running. A stopped container is 409. */
int docker_pid_of(json_t *container, const char *name, long *pid, sbx_err *err);

/* /proc/PID/cgroup's text: the cgroup the process is in, relative to the
 * hierarchy's root and without the leading '/': cgroup v1's memory
 * hierarchy ("N:memory:/docker/ID", also "N:...,memory,...:PATH"), else
 * v2's one ("0::/system.slice/docker-ID.scope"). Refuses the root itself,
 * "..", and anything but [A-Za-z0-9._:@/-]. 0 or -1. */
int docker_cgroup_of(const char *text, char *rel, size_t sz);

#endif
