/* runsc for one sandbox: its command lines (one --root for the node),
 * `runsc run --detach` and the container's removal, and what runsc and the kernel know
 * of it: the containers under --root, the sentry's pid, the cgroups runsc
 * made (cgroupsPath /sbx/ID) and their OOM kills. */
#ifndef SBX_WORKER_RUNSC_H
#define SBX_WORKER_RUNSC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "err.h"
#include "sandbox.h"

/* The cgroup parent of every sandbox: cgroupsPath is /CGROUP_PARENT/ID. */
#define CGROUP_PARENT "sbx"

/* runsc run --detach of the bundle, as a launcher (host.h) with PID 1's
 * output in console.log; done by deadline (ms, sbx_now_ms()). */
int runsc_start(const struct sandbox_node_cfg *c, const struct sandbox_spec *s,
		const struct sandbox_paths *p, long long deadline, sbx_err *err);
/* runsc checkpoint into image_dir (the container stops; it stays known
 * to runsc until removed), within timeout_ms. */
int runsc_checkpoint(const struct sandbox_node_cfg *c, const struct sandbox_paths *p, const char *id,
		     const char *image_dir, int timeout_ms, sbx_err *err);
/* runsc restore --detach of the bundle from image_dir, launched like
 * runsc_start (the same sentry pidfile, console.log), done by deadline. */
int runsc_restore(const struct sandbox_node_cfg *c, const struct sandbox_paths *p, const char *id,
		  const char *image_dir, long long deadline, sbx_err *err);
/* runsc kill ID SIG: a signal to the container's PID 1. */
int runsc_signal(const struct sandbox_node_cfg *c, const struct sandbox_paths *p, const char *id, const char *sig,
		 sbx_err *err);
/* runsc exec ID /bin/sync: what the sandbox wrote reaches its upper
 * directory on the host (a snapshot reads it from there). */
int runsc_sync(const struct sandbox_node_cfg *c, const struct sandbox_paths *p, const char *id, sbx_err *err);
/* SIGKILL for every process of the container (its cgroup's tasks, and
 * whatever a scan of /proc finds when the start was not whole), then
 * runsc's record dropped (its files under --root, or `runsc delete` of the
 * dead container when the layout is another); < 0 only when some survive
 * or runsc keeps its record. */
int runsc_remove(const struct sandbox_node_cfg *c, const struct sandbox_paths *p, const char *id,
		 sbx_err *err);
/* Containers runsc knows under our --root (ids; free with host_strv_free). */
int runsc_ids(const struct sandbox_node_cfg *c, char ***ids, size_t *n, sbx_err *err);

/* The sentry's pid from sandbox.pid (runsc --pid-file); 0 when none. */
pid_t runsc_read_pidfile(const struct sandbox_paths *p);
/* Is pid the sentry of sandbox id (and not a zombie)? */
bool runsc_sentry_alive(pid_t pid, const char *id);
/* Is sandbox id's sentry stopped (SIGSTOP from the host: state T)? Its
 * cgroup's CPU time says nothing then: a systrap stub whose process was
 * mid-request spins, a core each (one did, a dash just started, 197 ticks
 * in 2 s), so "the sandbox uses CPU, it is only busy" must ask this too. */
bool runsc_sentry_stopped(const struct sandbox_node_cfg *c, const char *id);

/* Removes the cgroups runsc made for it that outlived it; -1 (err naming
 * it) when one is still busy after ~1 s. */
int runsc_cgroups_remove(const char *id, sbx_err *err);
/* The oom_kill count of its memory cgroup; -1 when unknown. */
long runsc_oom_kills(const char *id);

#endif
