/* Sandboxes Nomad runs on this node (driver = nomad, doc/nomad.md): the
 * node agent did not make them, it adopts them. Nomad's docker driver
 * started the task (runsc, the template's image, sbx-init as its command,
 * listening in the allocation's shared directory); the provisioner hands
 * the channel key and the allocation id to this node's agent, which keeps
 * them in state_dir/nomad/ID/ (host only, never inside the sandbox):
 *
 *   nomad/ID/chan.key   the channel key (the task got it as SBX_CHANNEL_KEY)
 *   nomad/ID/alloc.id   the Nomad allocation; sbx-init's socket is
 *                       nomad_alloc_dir/ALLOC/alloc/sbx-init.sock
 *   nomad/ID/cgroup     "PID CGROUP": the host pid of the container's
 *                       init (Docker's State.Pid) and its cgroup, noted
 *                       when its use was first read (stats.c)
 *   nomad/ID/paused     present from the moment a pause begins until a
 *                       resume has thawed the container: the sandbox is
 *                       meant to be paused (Docker froze its container,
 *                       `docker pause`, or is about to)
 *
 * Everything else of the sandbox (container, image, cgroups) is Nomad's,
 * but for its network, which this agent wired when Nomad's client ran the
 * sbx CNI plugin (nomad_net.c): destroying an adopted sandbox here removes
 * that network and forgets it, and the provisioner deregisters the job. sandbox.c's connect, alive, destroy and
 * list come here for an adopted id. */
#include "config.h"
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "chanauth.h"
#include "cleanup.h"
#include "clock.h"
#include "cni.h"
#include "docker.h"
#include "docker_answer.h"
#include "host.h"
#include "log.h"
#include "nomad_net.h"
#include "nomad_job.h"
#include "sandbox.h"

#define ADOPT_SOCK "sbx-init.sock" /* in the allocation's /alloc (nomad_job.c's --channel) */
/* the node agent asks this in its loop (at adoption, on a stats request) */
#define ADOPT_DOCKER_MS 2000

static void adopt_dir(const struct sandbox_node_cfg *c, const char *id, char *out, size_t sz)
{
	snprintf(out, sz, "%.300s/nomad/%.24s", c->state_dir, id);
}

bool sandbox_adopted(const struct sandbox_node_cfg *c, const char *id)
{
	char d[600];

	if (!sbx_id_valid(id) || !c->state_dir)
		return false;
	adopt_dir(c, id, d, sizeof(d));
	return access(d, F_OK) == 0;
}

static int write_file(int dfd, const char *name, const char *v, sbx_err *err)
{
	cleanup_close int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	size_t n = strlen(v);

	if (fd < 0 || write(fd, v, n) != (ssize_t)n)
		return sbx_err_sys(err, "sandbox", "write %s", name);
	return 0;
}

static int read_file(const struct sandbox_node_cfg *c, const char *id, const char *name, char *buf, size_t sz,
		     sbx_err *err)
{
	char path[700];
	cleanup_close int fd = -1;
	ssize_t n;

	adopt_dir(c, id, path, sizeof(path));
	snprintf(path + strlen(path), sizeof(path) - strlen(path), "/%s", name);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, "sandbox", "open %s", path);
	n = read(fd, buf, sz - 1);
	if (n < 0)
		return sbx_err_sys(err, "sandbox", "read %s", path);
	buf[n] = 0;
	return 0;
}

int sandbox_adopt(const struct sandbox_node_cfg *c, const char *id, const char *alloc_id, const char *key_hex,
		  sbx_err *err)
{
	uint8_t key[SBX_CHAN_KEY_LEN];
	char d[600];
	cleanup_close int dfd = -1;

	if (!sbx_id_valid(id) || !cni_alloc_ok(alloc_id))
		return sbx_err_set(err, 400, "sandbox", "bad adoption (placement %s, allocation %s)", id, alloc_id);
	if (!c->nomad_alloc_dir || c->nomad_alloc_dir[0] != '/')
		return sbx_err_set(err, 500, "sandbox_config", "nomad_alloc_dir must be an absolute path");
	if (strlen(key_hex) != SBX_CHAN_KEY_HEX || sbx_chan_key_parse(key_hex, key, err) < 0)
		return sbx_err_set(err, 400, "sandbox", "bad channel key");
	explicit_bzero(key, sizeof(key));
	snprintf(d, sizeof(d), "%.300s/nomad", c->state_dir);
	mkdir(c->state_dir, 0700);
	mkdir(d, 0700);
	adopt_dir(c, id, d, sizeof(d));
	if (mkdir(d, 0700) < 0 && errno != EEXIST)
		return sbx_err_sys(err, "sandbox", "mkdir %s", d);
	dfd = open(d, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return sbx_err_sys(err, "sandbox", "open %s", d);
	if (write_file(dfd, "alloc.id", alloc_id, err) < 0 || write_file(dfd, "chan.key", key_hex, err) < 0) {
		sbx_err e2 = SBX_ERR_INIT;
		sandbox_adopted_forget(c, id, &e2);
		return -1;
	}
	return 0;
}

int sandbox_adopted_forget(const struct sandbox_node_cfg *c, const char *id, sbx_err *err)
{
	char d[600], f[700];

	if (!sbx_id_valid(id))
		return sbx_err_set(err, 400, "sandbox", "bad sandbox id '%s'", id);
	adopt_dir(c, id, d, sizeof(d));
	if (sandbox_adopted_paused(c, id)) {
		/* thawed, so that Nomad's stop (a signal, then SIGKILL) is not
		 * held by a frozen container; best effort: Docker kills a paused
		 * one too */
		sbx_err e2 = SBX_ERR_INIT;
		if (sandbox_adopted_pause(c, id, false, &e2) < 0)
			log_warnx("sandbox %s: thawing before its end: %s", id, e2.msg);
	}
	snprintf(f, sizeof(f), "%s/paused", d);
	if (unlink(f) < 0 && errno != ENOENT)
		return sbx_err_sys(err, "sandbox", "unlink %s", f);
	snprintf(f, sizeof(f), "%s/cgroup", d);
	if (unlink(f) < 0 && errno != ENOENT)
		return sbx_err_sys(err, "sandbox", "unlink %s", f);
	snprintf(f, sizeof(f), "%s/chan.key", d);
	if (unlink(f) < 0 && errno != ENOENT)
		return sbx_err_sys(err, "sandbox", "unlink %s", f);
	snprintf(f, sizeof(f), "%s/alloc.id", d);
	if (unlink(f) < 0 && errno != ENOENT)
		return sbx_err_sys(err, "sandbox", "unlink %s", f);
	if (rmdir(d) < 0 && errno != ENOENT)
		return sbx_err_sys(err, "sandbox", "rmdir %s", d);
	/* the network we wired for it (sbx-cni's ADD): ours to remove, the
	 * DEL that comes when Nomad stops the allocation finds nothing left */
	if (nomad_net_wired(c, id) && nomad_net_unwire(c, id, err) < 0)
		return -1;
	return 0;
}

/* The allocation's shared directory can be changed by the sandbox (it is
 * /alloc inside): like the local driver's chan/, the socket is opened
 * without following symlinks, must be a socket, and is connected to through
 * its descriptor. *errno_out: connect's errno (ENOENT when a part is missing). */
static int dial(const struct sandbox_node_cfg *c, const char *id, int *out, int *errno_out, sbx_err *err)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char alloc[80], base[700];
	cleanup_close int bfd = -1, afd = -1, sfd = -1, fd = -1;
	struct stat st;
	size_t l;

	*errno_out = 0;
	if (read_file(c, id, "alloc.id", alloc, sizeof(alloc), err) < 0)
		return -1;
	l = strcspn(alloc, "\n");
	alloc[l] = 0;
	if (!cni_alloc_ok(alloc))
		return sbx_err_set(err, 500, "sandbox", "%s: a malformed allocation id", id);
	snprintf(base, sizeof(base), "%s/%s", c->nomad_alloc_dir ? c->nomad_alloc_dir : "", alloc);
	bfd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (bfd >= 0)
		afd = openat(bfd, "alloc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (afd >= 0)
		sfd = openat(afd, ADOPT_SOCK, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0) {
		*errno_out = errno;
		return sbx_err_sys(err, "sandbox", "open %s/alloc/" ADOPT_SOCK, base);
	}
	if (fstat(sfd, &st) < 0 || !S_ISSOCK(st.st_mode))
		return sbx_err_set(err, 500, "sandbox", "%s/alloc/" ADOPT_SOCK " is not a socket (replaced from inside?)",
				   base);
	snprintf(a.sun_path, sizeof(a.sun_path), "/proc/self/fd/%d", sfd);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return sbx_err_sys(err, "sandbox", "socket");
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		*errno_out = errno;
		return sbx_err_sys(err, "sandbox", "connect %s/alloc/" ADOPT_SOCK, base);
	}
	*out = sbx_steal_fd(&fd);
	return 0;
}

static int adopted_key(const struct sandbox_node_cfg *c, const char *id, uint8_t key[SBX_CHAN_KEY_LEN],
		       sbx_err *err)
{
	char hex[SBX_CHAN_KEY_HEX + 2];

	if (read_file(c, id, "chan.key", hex, sizeof(hex), err) < 0)
		return -1;
	if (strlen(hex) != SBX_CHAN_KEY_HEX || sbx_chan_key_parse(hex, key, err) < 0) {
		explicit_bzero(hex, sizeof(hex));
		return sbx_err_set(err, 500, "sandbox", "%s: its channel key is malformed", id);
	}
	explicit_bzero(hex, sizeof(hex));
	return 0;
}

int sandbox_adopted_dial(const struct sandbox_node_cfg *c, const char *id, int *out, uint8_t key[SBX_CHAN_KEY_LEN],
			 sbx_err *err)
{
	int e;

	if (adopted_key(c, id, key, err) < 0)
		return -1;
	if (dial(c, id, out, &e, err) < 0) {
		explicit_bzero(key, SBX_CHAN_KEY_LEN);
		return -1;
	}
	return 0;
}

int sandbox_adopted_connect(const struct sandbox_node_cfg *c, const char *id, int timeout_ms, int *out,
			    sbx_err *err)
{
	uint8_t key[SBX_CHAN_KEY_LEN];
	long long deadline = sbx_now_ms() + (timeout_ms > 0 ? timeout_ms : 5000);

	if (adopted_key(c, id, key, err) < 0)
		return -1;
	for (;;) {
		cleanup_close int fd = -1;
		long long left = deadline - sbx_now_ms();
		int e;

		/* sbx-init binds its socket a moment after Nomad sees the task run */
		if (dial(c, id, &fd, &e, err) == 0 &&
		    sbx_chan_client_handshake(fd, key, id, left > 0 ? (int)left : 1, err) == 0) {
			*out = sbx_steal_fd(&fd);
			explicit_bzero(key, sizeof(key));
			return 0;
		}
		if (sbx_now_ms() >= deadline) {
			explicit_bzero(key, sizeof(key));
			return sbx_err_ctx(err, "sbx-init of Nomad's task not up within %d ms", timeout_ms);
		}
		host_sleep_ms(20);
	}
}

int sandbox_adopted_alive(const struct sandbox_node_cfg *c, const char *id, char *why, size_t whysz)
{
	sbx_err err = SBX_ERR_INIT;
	cleanup_close int fd = -1;
	int e;

	if (dial(c, id, &fd, &e, &err) == 0)
		return 1; /* something listens: sbx-init (the handshake proves it on use) */
	if (e == ENOENT || e == ECONNREFUSED) {
		snprintf(why, whysz, "its Nomad task stopped (sbx-init's socket %s)",
			 e == ENOENT ? "is gone" : "refuses connections");
		return 0;
	}
	snprintf(why, whysz, "%s", err.msg);
	return -1;
}

int sandbox_adopted_list(const struct sandbox_node_cfg *c, struct host_idset *s)
{
	char d[600];

	snprintf(d, sizeof(d), "%.300s/nomad", c->state_dir);
	return host_idset_add_dir(s, d);
}

/* nomad/ID/NAME exists. */
static bool adopted_has(const struct sandbox_node_cfg *c, const char *id, const char *name)
{
	char d[600], f[700];

	if (!sbx_id_valid(id))
		return false;
	adopt_dir(c, id, d, sizeof(d));
	snprintf(f, sizeof(f), "%s/%s", d, name);
	return access(f, F_OK) == 0;
}

bool sandbox_adopted_paused(const struct sandbox_node_cfg *c, const char *id)
{
	return adopted_has(c, id, "paused");
}

int sandbox_adopted_container(const struct sandbox_node_cfg *c, const char *id, char *out, size_t sz, sbx_err *err)
{
	char alloc[64];

	if (read_file(c, id, "alloc.id", alloc, sizeof(alloc), err) < 0)
		return -1;
	if (!cni_alloc_ok(alloc))
		return sbx_err_set(err, 500, "sandbox", "sandbox %s: bad allocation id on the node", id);
	snprintf(out, sz, "%s-%s", NOMAD_TASK, alloc);
	return 0;
}

int sandbox_adopted_pause(const struct sandbox_node_cfg *c, const char *id, bool pause, sbx_err *err)
{
	char d[600], f[700], name[128];
	cleanup_close int fd = -1;

	if (!sbx_id_valid(id) || !sandbox_adopted(c, id))
		return sbx_err_set(err, 404, "sandbox", "sandbox %s is not adopted here", id);
	if (sandbox_adopted_container(c, id, name, sizeof(name), err) < 0)
		return -1;
	adopt_dir(c, id, d, sizeof(d));
	snprintf(f, sizeof(f), "%s/paused", d);
	if (!pause) {
		/* the mark goes only once the container runs again: a resume
		 * that fails leaves the sandbox paused */
		if (docker_pause(c->docker_host, name, false, err) < 0)
			return sbx_err_ctx(err, "resume %s", id);
		if (unlink(f) < 0 && errno != ENOENT)
			return sbx_err_sys(err, "sandbox", "unlink %s", f);
		return 0;
	}
	/* the mark first: a pause interrupted after Docker froze the
	 * container is still known to be one (settle: resumed or paused) */
	fd = open(f, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_err_sys(err, "sandbox", "create %s", f);
	sandbox_fault_point(c, "pause-checkpoint", id);
	if (docker_pause(c->docker_host, name, true, err) < 0) {
		unlink(f);
		return sbx_err_ctx(err, "pause %s", id);
	}
	return 0;
}

void sandbox_adopted_unfreeze(const struct sandbox_node_cfg *c, const char *id, const char *when)
{
	sbx_err err = SBX_ERR_INIT;

	if (!sandbox_adopted_paused(c, id) && sandbox_adopted_pause(c, id, false, &err) < 0)
		log_warnx("sandbox %s: thaw %s: %s", id, when, err.msg);
}

/* rel := the cgroup process pid is in (docker_cgroup_of of /proc/PID/cgroup). */
static int proc_cgroup(long pid, char *rel, size_t sz)
{
	char path[64], buf[4096];
	cleanup_close int fd = -1;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%ld/cgroup", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || (n = read(fd, buf, sizeof(buf) - 1)) <= 0)
		return -1;
	buf[n] = 0;
	return docker_cgroup_of(buf, rel, sz);
}

bool sandbox_adopted_cgroup_noted(const struct sandbox_node_cfg *c, const char *id)
{
	return adopted_has(c, id, "cgroup");
}

int sandbox_adopted_cgroup(const struct sandbox_node_cfg *c, const char *id, char *rel, size_t sz, long *pid,
			   sbx_err *err)
{
	char name[128], buf[600], kept[520], d[600];
	cleanup_close int dfd = -1;
	sbx_err e2 = SBX_ERR_INIT;
	long p = -1;

	*pid = -1;
	if (!sbx_id_valid(id) || !sandbox_adopted(c, id))
		return sbx_err_set(err, 404, "sandbox", "sandbox %s is not adopted here", id);
	/* noted before, and that process is still in that cgroup: no Docker call */
	if (read_file(c, id, "cgroup", buf, sizeof(buf), &e2) == 0 && sscanf(buf, "%ld %519s", &p, kept) == 2 &&
	    p > 1 && proc_cgroup(p, rel, sz) == 0 && !strcmp(rel, kept)) {
		*pid = p;
		return 0;
	}
	if (sandbox_adopted_container(c, id, name, sizeof(name), err) < 0 ||
	    docker_pid(c->docker_host, name, ADOPT_DOCKER_MS, &p, err) < 0)
		return -1;
	if (proc_cgroup(p, rel, sz) < 0)
		return sbx_err_set(err, 503, "sandbox", "container %s: no cgroup of its in /proc/%ld/cgroup", name, p);
	snprintf(buf, sizeof(buf), "%ld %s\n", p, rel);
	adopt_dir(c, id, d, sizeof(d));
	dfd = open(d, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || write_file(dfd, "cgroup", buf, &e2) < 0)
		log_warnx("sandbox %s: noting its cgroup: %s", id, dfd < 0 ? strerror(errno) : e2.msg);
	*pid = p;
	return 0;
}
