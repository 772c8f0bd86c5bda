/* One sandbox on this node (local driver): everything the node agent makes
 * for it and takes away again. Each function is a sequence of host steps;
 * a failure undoes what that call made, and destroy is idempotent, so the
 * reaper can call it on anything it finds.
 *
 * Layout under state_dir:
 *   runsc/                      runsc --root (one for all sandboxes)
 *   templates/NAME/rootfs       template root, read-only lower layer
 *   sandboxes/ID/               one per sandbox:
 *     sandbox.json              what was asked (written first: intent)
 *     disk.img                  sparse ext4 image, specs.disk GB
 *     disk/                     its mount: upper/ and work/ of the overlay,
 *       chan/                   bound at /run/sbx: sbx-init's channel socket
 *       tmp/                    bound at /tmp
 *                               (both on the sandbox's own disk: whatever the
 *                               sandbox writes there counts against its size,
 *                               never the host's; no host directory is ever
 *                               shared writable with a sandbox)
 *     chan.key                  the channel key (host only; sbx-init gets it
 *                               in its environment at start: chanauth.h)
 *     rootfs/                   overlay mount the container runs on
 *     volume.id, volume/        its volume's id and mount (volume.h), if it has one
 *     bundle/config.json        OCI spec
 *     sandbox.pid                the sentry's host pid (runsc --pid-file)
 *     runsc.log, console.log     runsc's log; PID 1's own stdout/stderr
 *   nomad/ID/                   a sandbox Nomad runs here, adopted (adopt.c):
 *                               its channel key and allocation id only
 *
 * The process that calls sandbox_start becomes a child subreaper
 * (PR_SET_CHILD_SUBREAPER): every sentry becomes its child once runsc
 * detaches, and it must reap them (waitpid(-1, WNOHANG) on SIGCHLD), or
 * `runsc delete` waits ~1.6 s for each. doc/sandbox-node.md has the details.
 */
#ifndef SBX_WORKER_SANDBOX_H
#define SBX_WORKER_SANDBOX_H

#include <stdbool.h>
#include <sys/types.h>
#include <jansson.h>
#include "err.h"
#include "id.h"
#include "chanauth.h"
#include "egress_policy.h"
#include "net.h"
#include "settings.h"

struct sandbox_spec {
	char id[SBX_ID_LEN + 1];  /* also the runsc container id (fixed length) */
	const char *template;     /* name under state_dir/templates */
	int cpu;                  /* MHz shares, 1..2000: 1000 = one core */
	int memory_mb;
	int disk_gb;
	const char *const *env;   /* NULL-terminated "K=V" (the sandbox's default env) */
	/* its volume (volume.h), or volume_id NULL: mounted at mount_path
	 * (absolute, checked by the API, made inside without following
	 * symlinks); volume_create: a fresh volume of volume_gb GB, made here
	 * when its image is not there yet (persistent: true) */
	const char *volume_id;
	const char *mount_path;
	int volume_gb;
	bool volume_create;
	const struct sbx_egress *egress; /* put in force before the container starts; NULL: deny_all */
	/* a snapshot's image (sbx/snapshots/ID@DIGEST) the sandbox starts
	 * from instead of the template's (snapshot.c); NULL: the template */
	const char *image;
};

struct sandbox_paths {
	char dir[512], disk_img[512], disk_mnt[512], rootfs[512], chan_dir[512], chan_sock[512], tmp_dir[512],
		chan_key[512],
		bundle[512], runsc_root[512];
};

struct sandbox_node_cfg {
	const char *state_dir;
	const char *runsc;        /* runsc binary */
	const char *platform;     /* systrap | ptrace */
	const char *init_path;    /* host path of the static sbx-init; "" or NULL: a stand-in
	                           * PID 1 (`sleep infinity` from the rootfs), no channel */
	int nproc_limit;          /* most processes a sandbox may have (the memory may
	                           * allow fewer: sandbox_nproc) */
	int pids_max;             /* host pids.max backstop */
	bool spare_shell;         /* sbx-init --spare-shell (setting exec_spare_shell) */
	const struct net_config *net; /* the node's network (bridge, subnet, uplink netns) */
	int start_timeout_ms;     /* runsc run + waiting for sbx-init; <= 0: 30 s */
	bool fault_points;        /* test hook (setting fault_points): sandbox_start may stop
	                           * itself at armed points (doc/testing.md) */
	const char *snapshot_helper; /* the sbx-snapshot helper (pack, push, pull) */
	const char *registry;        /* the registry as HOST:PORT */
	const char *nomad_alloc_dir; /* the Nomad client's data_dir/alloc (adopt.c) */
	const char *docker_host;     /* unix:///PATH of the Docker that runs Nomad's tasks here */
};

/* Runs with sbx-init as PID 1 (init_path set), or with the stand-in. */
static inline bool sandbox_has_init(const struct sandbox_node_cfg *c)
{
	return c->init_path && *c->init_path;
}

void sandbox_paths(const struct sandbox_node_cfg *c, const char *id, struct sandbox_paths *p);
/* Processes the sandbox's own commands may have (RLIMIT_NPROC): half a
 * process per MB of memory, 64 at least, nproc_limit at most. Each task costs
 * the sentry ~0.5 MB of the sandbox's memory cgroup besides the program's
 * own memory (measured: doc/sandbox-node.md), so a fork bomb under this limit
 * gets EAGAIN instead of the host's OOM killer ending the whole sandbox.
 * sbx-init itself may have SANDBOX_INIT_NPROC_HEADROOM more, so exec works
 * while a bomb holds every process the commands may have. */
int sandbox_nproc(const struct sandbox_node_cfg *c, const struct sandbox_spec *s);
#define SANDBOX_INIT_NPROC_HEADROOM 32
/* Makes everything and starts the container; returns when sbx-init has
 * connected (or listens) on the channel. On failure nothing is left. */
int sandbox_start(const struct sandbox_node_cfg *c, const struct sandbox_spec *s, sbx_err *err);
/* Stops and removes everything of the sandbox; fine to call for one that
 * is half-made or already gone. */
int sandbox_destroy(const struct sandbox_node_cfg *c, const char *id, sbx_err *err);
/* Is its sentry (the runsc sandbox process) alive? 1 yes, 0 no, -1 unknown. */
int sandbox_alive(const struct sandbox_node_cfg *c, const char *id, char *why, size_t whysz);
/* The address its start gave the sandbox's network (kept beside it, so
 * nothing lists the node's table for it): 0, or -1 and "" when none. */
int sandbox_net_ip(const struct sandbox_node_cfg *c, const char *id, char ip[16]);
/* Where its start saved what it resolved its egress hostnames to
 * (egress_resolved_save), so the node agent need not ask again: 0, or -1. */
int sandbox_egress_resolved_path(const struct sandbox_node_cfg *c, const char *id, char *out, size_t n);
/* How often the kernel's OOM killer struck inside the sandbox's memory cgroup
 * (-1: unknown). gVisor often survives a memory bomb with only the offending
 * process killed: a count that rose during an exec says why it died. */
long sandbox_oom_kills(const char *id);
/* A test's fault point (setting fault_points, doc/testing.md): with
 * state_dir/faults/POINT.armed present, the caller writes its pid to
 * faults/POINT.ID.pid and stops itself (SIGSTOP). */
void sandbox_fault_point(const struct sandbox_node_cfg *c, const char *point, const char *id);
/* The same for a process without a node's config (the provisioner): on is
 * the setting fault_points, state_dir the setting state_dir. */
void fault_point(bool on, const char *state_dir, const char *point, const char *id);
/* Is the fault point armed: state_dir/faults/POINT.armed, or with ID
 * state_dir/faults/POINT.ID.armed (a point armed for one sandbox)? Always
 * false with fault_points off. */
bool fault_armed(bool on, const char *state_dir, const char *point, const char *id);
/* Memory pause (pause.c): sbx-init closes its channel (gVisor cannot save a
 * socket bound to the host), runsc checkpoints the container into
 * checkpoint/ in its directory and the container is removed; disk, mounts
 * and network stay. *bytes: the checkpoint's size on disk. On failure the
 * sandbox runs on when it can (its channel back). Idempotent: a complete
 * checkpoint is a paused sandbox. */
int sandbox_pause(const struct sandbox_node_cfg *c, const char *id, long long *bytes, sbx_err *err);
/* runsc restore from checkpoint/, sbx-init's channel back (SIGUSR2) and its
 * handshake; then the checkpoint goes. On failure the sandbox stays paused
 * (the checkpoint is kept; whatever the restore made is removed). */
int sandbox_resume(const struct sandbox_node_cfg *c, const char *id, sbx_err *err);
/* A pause or resume stopped with the container running: it is the
 * sandbox. Its channel is reopened (SIGUSR2: a pause may have closed it)
 * and a checkpoint beside it removed: a resume stopped after its restore
 * (killed at resume-restored) leaves one, and the restored sandbox has run
 * since, so its disk has moved on from it (a second restore would put old
 * memory over a newer disk, and fails outright when a file it had open is
 * gone). -1 when the channel could not be reopened (a checkpoint is then
 * kept). */
int sandbox_resume_finish(const struct sandbox_node_cfg *c, const char *id, sbx_err *err);
/* 1 when the sandbox holds a complete checkpoint (it is paused), else 0. */
int sandbox_paused(const struct sandbox_node_cfg *c, const char *id);
/* A snapshot (snapshot.c): the sandbox's writable layer (of a sandbox Nomad
 * runs: its Docker container's, adopt.c), read while its cgroup is frozen,
 * pushed by the helper as image sbx/snapshots/SNAPSHOT (its layer on top of
 * the image the sandbox started from). digest: the manifest's; bytes: the new layer's compressed size. The sandbox runs on
 * either way; the intermediate files are gone when it returns. */
struct sandbox_snapshot_req {
	const char *snapshot_id;
	const char *registry; /* HOST:PORT, loopback */
	const char *helper;   /* the sbx-snapshot helper's path */
};
int sandbox_snapshot(const struct sandbox_node_cfg *c, const char *id, const struct sandbox_snapshot_req *rq,
		     char *digest, size_t dsz, long long *bytes, sbx_err *err);
/* The image a sandbox started from, REPO@DIGEST (its sandbox.json). */
int sandbox_image_of(const struct sandbox_node_cfg *c, const char *id, char *image, size_t isz, sbx_err *err);
/* The overlay lower directories (":"-joined, top first) of a snapshot's
 * image, pulled from the registry when this node lacks them, and the
 * image's env. */
int sandbox_image_resolve(const struct sandbox_node_cfg *c, const char *image, char *lower, size_t lsz,
			  json_t **env, sbx_err *err);
/* Where a snapshot's intermediate files live (snap_id NULL: the parent of all). */
void sandbox_snapshot_workdir(const struct sandbox_node_cfg *c, const char *snap_id, char *out, size_t outsz);
/* Ids with anything left on this node (dir, mounts, loop devices, runsc
 * containers), found by independent listing, for the reaper. Scoped to
 * state_dir: it never returns another node instance's sandbox (so it does
 * not use net_list, whose netns names are global; a sandbox's directory is
 * made before and removed after its network, so it covers the network).
 * deep: the mounts and loop devices too (a mount has its directory, and the
 * directory outlives its loop device, so they find only what someone took
 * the directory from; with a thousand sandboxes they were most of the
 * listing's time). Free with sandbox_list_free. */
int sandbox_list(const struct sandbox_node_cfg *c, bool deep, char ***ids, size_t *n, sbx_err *err);
void sandbox_list_free(char **ids, size_t n);
/* A connection to sbx-init's channel of a running sandbox, after its HELLO
 * frame (checked: type and version); *fd is O_CLOEXEC and blocking. Fails
 * with code "no_init" when the sandbox runs without sbx-init (init_path ""). */
int sandbox_connect(const struct sandbox_node_cfg *c, const char *id, int timeout_ms, int *fd,
		    sbx_err *err);
/* One connect to sbx-init's socket, without the handshake, and the
 * channel's key for it (sbx_chan_hs_step; the node agent's loop does the
 * handshake in its epoll). *fd is O_CLOEXEC and blocking. "no_init" as
 * sandbox_connect. A sandbox whose socket is not there yet fails: the
 * caller may fall back to sandbox_connect, which waits for it. */
int sandbox_dial(const struct sandbox_node_cfg *c, const char *id, int *fd, uint8_t key[SBX_CHAN_KEY_LEN],
		 sbx_err *err);

/* adopt.c: sandboxes Nomad runs on this node, which the node agent adopts
 * (doc/nomad.md). sandbox_connect, sandbox_alive, sandbox_destroy and
 * sandbox_list handle an adopted id through these. */
bool sandbox_adopted(const struct sandbox_node_cfg *c, const char *id);
/* Keeps the channel key and the allocation of placement id (state_dir/nomad/ID). */
int sandbox_adopt(const struct sandbox_node_cfg *c, const char *id, const char *alloc_id, const char *key_hex,
		  sbx_err *err);
/* Forgets it (the allocation itself is Nomad's); fine when already gone. */
int sandbox_adopted_forget(const struct sandbox_node_cfg *c, const char *id, sbx_err *err);
int sandbox_adopted_connect(const struct sandbox_node_cfg *c, const char *id, int timeout_ms, int *fd,
			    sbx_err *err);
int sandbox_adopted_dial(const struct sandbox_node_cfg *c, const char *id, int *fd, uint8_t key[SBX_CHAN_KEY_LEN],
			 sbx_err *err);
/* 1: sbx-init's socket takes connections; 0: the task stopped (why); -1: unknown. */
int sandbox_adopted_alive(const struct sandbox_node_cfg *c, const char *id, char *why, size_t whysz);
struct host_idset;
int sandbox_adopted_list(const struct sandbox_node_cfg *c, struct host_idset *s);
/* Memory pause of a sandbox Nomad runs: its container is Docker's, so it is
 * frozen in place (`docker pause` through docker_host; runsc pauses the
 * whole sandbox) rather than checkpointed: Nomad's task keeps running, and
 * memory, processes and the channel's socket stay. A pause marks the
 * sandbox paused (state_dir/nomad/ID/paused) before Docker freezes it, a
 * resume removes the mark after Docker thawed it; both are idempotent.
 * sandbox_pause, sandbox_resume, sandbox_resume_finish and sandbox_paused
 * come here for an adopted id. */
int sandbox_adopted_pause(const struct sandbox_node_cfg *c, const char *id, bool pause, sbx_err *err);
bool sandbox_adopted_paused(const struct sandbox_node_cfg *c, const char *id);
/* Its container thawed, unless a pause is meant (the mark): what a
 * snapshot's copy that was cut short left paused (snapshot.c). A failure is
 * logged, naming when. */
void sandbox_adopted_unfreeze(const struct sandbox_node_cfg *c, const char *id, const char *when);
/* Its container's name in Docker: TASK-ALLOC, as Nomad's docker driver
 * names a task's container. */
int sandbox_adopted_container(const struct sandbox_node_cfg *c, const char *id, char *out, size_t sz, sbx_err *err);
/* The cgroup (relative to its hierarchy's root, e.g. "docker/CID") and the
 * host pid of an adopted sandbox's container (Docker's State.Pid: for
 * runsc the sandbox's process, in its network namespace), which stats.c
 * reads its use from. Docker is asked once (within 2 s: the node agent
 * asks in its loop, when it adopts the sandbox); then nomad/ID/cgroup is
 * used while that pid is still in that cgroup. */
int sandbox_adopted_cgroup(const struct sandbox_node_cfg *c, const char *id, char *rel, size_t sz, long *pid,
			   sbx_err *err);
/* Its cgroup is noted (Docker need not be asked). */
bool sandbox_adopted_cgroup_noted(const struct sandbox_node_cfg *c, const char *id);

#endif
