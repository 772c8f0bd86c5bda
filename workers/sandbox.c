/* One sandbox on this node: its disk image, overlay root, network, OCI bundle
 * and runsc container; made in order, unmade in reverse. See sandbox.h for the
 * layout and doc/sandbox-node.md for why each step is done the way it is.
 *
 * Every step leaves something findable from the outside (a directory, a
 * mount in /proc/self/mountinfo, a loop device whose backing file is under
 * the sandbox's directory, a runsc container under STATE/runsc, a cgroup,
 * the network's own leftovers), so destroy and list never depend on a record
 * having been written: they look. A failed start calls the same teardown as
 * destroy, which undoes whatever exists, last made first.
 *
 * The steps themselves live beside it, one file per kind of thing: disk.c
 * (image, loop device, mounts, removing the directory), runsc.c (runsc's
 * command lines, state, pids, cgroups), oci.c (the bundle), net.c (the
 * network); tools run through host.c's runner. */
#include "config.h"
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "chanauth.h"
#include "cgwarm.h"
#include "cleanup.h"
#include "clock.h"
#include "disk.h"
#include "err.h"
#include "frame.h"
#include "egress.h"
#include "host.h"
#include "log.h"
#include "oci.h"
#include "runsc.h"
#include "sandbox.h"
#include "nomad_net.h"
#include "nomad_vol.h"
#include "volume.h"
#include "freezer.h"

#define DEFAULT_START_TIMEOUT_MS 30000

/* ---- small helpers ----------------------------------------------------- */

static bool template_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > 63 || !(islower((unsigned char)s[0]) || isdigit((unsigned char)s[0])))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '.' ||
		      s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

/* Paths end up in mount options (overlay's lowerdir is split on ',' and ':')
 * and in runsc's flags: refuse anything odd rather than escape it. */
static bool path_ok(const char *s)
{
	if (!s || s[0] != '/')
		return false;
	for (const char *p = s; *p; p++)
		if (!(isalnum((unsigned char)*p) || strchr("/._-+", *p)))
			return false;
	return true;
}

/* An overlay lowerdir: plain paths joined by ':'. */
static bool lowers_ok(const char *s)
{
	char buf[1500], *save = NULL, *t;

	if (strlen(s) >= sizeof(buf) || !*s || s[strlen(s) - 1] == ':' || strstr(s, "::"))
		return false;
	snprintf(buf, sizeof(buf), "%s", s);
	for (t = strtok_r(buf, ":", &save); t; t = strtok_r(NULL, ":", &save))
		if (!path_ok(t))
			return false;
	return true;
}

/* ---- paths --------------------------------------------------------------- */

void sandbox_paths(const struct sandbox_node_cfg *c, const char *id, struct sandbox_paths *p)
{
	/* check_cfg keeps state_dir under 300 characters and id at 24 */
#define SB "%.300s/sandboxes/%.24s"
	snprintf(p->dir, sizeof(p->dir), SB, c->state_dir, id);
	snprintf(p->disk_img, sizeof(p->disk_img), SB "/disk.img", c->state_dir, id);
	snprintf(p->disk_mnt, sizeof(p->disk_mnt), SB "/disk", c->state_dir, id);
	snprintf(p->rootfs, sizeof(p->rootfs), SB "/rootfs", c->state_dir, id);
	snprintf(p->chan_dir, sizeof(p->chan_dir), SB "/disk/chan", c->state_dir, id);
	snprintf(p->chan_sock, sizeof(p->chan_sock), SB "/disk/chan/" CHAN_SOCK_NAME, c->state_dir, id);
	snprintf(p->tmp_dir, sizeof(p->tmp_dir), SB "/disk/tmp", c->state_dir, id);
	snprintf(p->chan_key, sizeof(p->chan_key), SB "/chan.key", c->state_dir, id);
	snprintf(p->bundle, sizeof(p->bundle), SB "/bundle", c->state_dir, id);
	snprintf(p->runsc_root, sizeof(p->runsc_root), "%.300s/runsc", c->state_dir);
#undef SB
}

int sandbox_nproc(const struct sandbox_node_cfg *c, const struct sandbox_spec *s)
{
	int n = s->memory_mb / 2;

	if (n > c->nproc_limit)
		n = c->nproc_limit;
	return n < 64 ? 64 : n;
}

static void sub_path(const struct sandbox_paths *p, const char *name, char *out, size_t n)
{
	snprintf(out, n, "%s/%s", p->dir, name);
}

static int check_cfg(const struct sandbox_node_cfg *c, const char *id, sbx_err *err)
{
	if (!sbx_id_valid(id))
		return sbx_err_set(err, 400, "sandbox", "bad sandbox id '%s'", id ? id : "");
	if (!path_ok(c->state_dir) || strlen(c->state_dir) > 300)
		return sbx_err_set(err, 500, "sandbox_config", "state_dir must be a plain absolute path");
	if (!path_ok(c->runsc))
		return sbx_err_set(err, 500, "sandbox_config", "runsc must be a plain absolute path");
	if (c->init_path && *c->init_path && !path_ok(c->init_path))
		return sbx_err_set(err, 500, "sandbox_config", "init_path must be a plain absolute path");
	if (!c->platform || (strcmp(c->platform, "systrap") && strcmp(c->platform, "ptrace")))
		return sbx_err_set(err, 500, "sandbox_config", "platform must be systrap or ptrace");
	if (!c->net)
		return sbx_err_set(err, 500, "sandbox_config", "no network configuration");
	return 0;
}

/* ---- the steps ----------------------------------------------------------------- */

/* templates/NAME/current -> DIGESTHEX, resolved once: a later unpack cannot
 * change a running sandbox's lower layer. */
static int template_resolve(const struct sandbox_node_cfg *c, const char *name, char *rootfs,
			    size_t rsz, char *digest, size_t dsz, json_t **env, sbx_err *err)
{
	char link[600], hex[80], ij[700];
	ssize_t r;
	json_t *img;
	json_error_t je;

	*env = NULL;
	if (!template_name_ok(name))
		return sbx_err_set(err, 400, "template", "bad template name '%s'", name ? name : "");
	snprintf(link, sizeof(link), "%s/templates/%s/current", c->state_dir, name);
	r = readlink(link, hex, sizeof(hex) - 1);
	if (r < 0)
		return errno == ENOENT ? sbx_err_set(err, 400, "template", "template '%s' is not on this node", name)
				       : sbx_err_sys(err, "template", "readlink %s", link);
	hex[r] = 0;
	if (r != 64 || strspn(hex, "0123456789abcdef") != 64)
		return sbx_err_set(err, 500, "template", "%s points at '%s', not a digest", link, hex);
	snprintf(rootfs, rsz, "%s/templates/%s/%s/rootfs", c->state_dir, name, hex);
	snprintf(digest, dsz, "sha256:%.64s", hex);
	if (access(rootfs, F_OK) < 0)
		return sbx_err_sys(err, "template", "%s", rootfs);
	snprintf(ij, sizeof(ij), "%s/templates/%s/%s/image.json", c->state_dir, name, hex);
	img = json_load_file(ij, 0, &je);
	if (img) {
		json_t *e = json_object_get(img, "env");
		*env = json_is_array(e) ? json_incref(e) : NULL;
		json_decref(img);
	}
	if (!*env)
		*env = json_array();
	return 0;
}

static int write_intent(const struct sandbox_node_cfg *c, const struct sandbox_spec *s,
			const struct sandbox_paths *p, const char *digest, sbx_err *err)
{
	json_t *env = json_array(), *j;
	char path[600];
	int rc;

	for (const char *const *e = s->env; e && *e; e++)
		json_array_append_new(env, json_string(*e));
	/* uplink_netns: where its network is made; a destroy takes it down
	 * there even after the node's setting changed (teardown) */
	j = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:o, s:s, s:I, s:s}", "id", s->id, "template", s->template,
		      "template_digest", digest, "cpu", s->cpu, "memory_mb", s->memory_mb, "disk_gb",
		      s->disk_gb, "env", env, "platform", c->platform, "created", (json_int_t)time(NULL),
		      "uplink_netns", c->net->uplink_netns ? c->net->uplink_netns : "");
	if (j && s->image)
		json_object_set_new(j, "image", json_string(s->image));
	if (!j)
		return sbx_err_set(err, 500, "sandbox", "cannot build sandbox.json");
	sub_path(p, "sandbox.json", path, sizeof(path));
	rc = json_dump_file(j, path, JSON_SORT_KEYS | JSON_INDENT(1));
	json_decref(j);
	return rc < 0 ? sbx_err_sys(err, "sandbox", "write %s", path) : 0;
}

/* ---- the channel to sbx-init ----------------------------------------------------- */

/* The channel key: made at start, kept in the sandbox's host directory. */
static int chan_key_make(const struct sandbox_paths *p, char hex[SBX_CHAN_KEY_HEX + 1], sbx_err *err)
{
	uint8_t key[SBX_CHAN_KEY_LEN];
	cleanup_close int fd = -1;

	if (sbx_chan_random(key, sizeof(key), err) < 0)
		return -1;
	sbx_chan_key_hex(key, hex);
	explicit_bzero(key, sizeof(key));
	fd = open(p->chan_key, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return sbx_err_sys(err, "sandbox", "create %s", p->chan_key);
	if (write(fd, hex, SBX_CHAN_KEY_HEX) != SBX_CHAN_KEY_HEX)
		return sbx_err_sys(err, "sandbox", "write %s", p->chan_key);
	return 0;
}

static int chan_key_read(const struct sandbox_paths *p, uint8_t key[SBX_CHAN_KEY_LEN], sbx_err *err)
{
	char hex[SBX_CHAN_KEY_HEX + 2];
	cleanup_close int fd = open(p->chan_key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return sbx_err_sys(err, "sandbox", "open %s", p->chan_key);
	n = read(fd, hex, sizeof(hex) - 1);
	if (n != SBX_CHAN_KEY_HEX)
		return sbx_err_set(err, 500, "sandbox", "%s is not a channel key", p->chan_key);
	hex[n] = 0;
	return sbx_chan_key_parse(hex, key, err);
}

/* Connects to the socket sbx-init bound in chan/ on the sandbox's disk. The
 * sandbox can change anything in that directory (it is /run/sbx inside), so
 * the path is never followed blindly: chan/ and the socket are opened without
 * following symlinks, the socket must be a socket, and it is connected to
 * through the descriptor. What answers must then prove it is this sandbox's
 * sbx-init (the v3 handshake with this sandbox's key). */
static int chan_dial(const struct sandbox_paths *p, int *out, sbx_err *err)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	cleanup_close int dfd = -1, cfd = -1, sfd = -1, fd = -1;
	struct stat st;

	dfd = open(p->disk_mnt, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return sbx_err_sys(err, "sandbox", "open %s", p->disk_mnt);
	cfd = openat(dfd, "chan", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (cfd < 0)
		return sbx_err_sys(err, "sandbox", "open %s", p->chan_dir);
	sfd = openat(cfd, CHAN_SOCK_NAME, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return sbx_err_sys(err, "sandbox", "open %s", p->chan_sock);
	if (fstat(sfd, &st) < 0 || !S_ISSOCK(st.st_mode))
		return sbx_err_set(err, 500, "sandbox", "%s is not a socket (replaced from inside?)", p->chan_sock);
	snprintf(a.sun_path, sizeof(a.sun_path), "/proc/self/fd/%d", sfd);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return sbx_err_sys(err, "sandbox", "socket");
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return sbx_err_sys(err, "sandbox", "connect %s", p->chan_sock);
	*out = sbx_steal_fd(&fd);
	return 0;
}

static int chan_connect_once(const struct sandbox_paths *p, const char *id, const uint8_t key[SBX_CHAN_KEY_LEN],
			     int timeout_ms, int *out, sbx_err *err)
{
	cleanup_close int fd = -1;

	if (chan_dial(p, &fd, err) < 0 || sbx_chan_client_handshake(fd, key, id, timeout_ms, err) < 0)
		return -1;
	*out = sbx_steal_fd(&fd);
	return 0;
}

int sandbox_dial(const struct sandbox_node_cfg *c, const char *id, int *fd, uint8_t key[SBX_CHAN_KEY_LEN],
		 sbx_err *err)
{
	struct sandbox_paths p;

	if (check_cfg(c, id, err) < 0)
		return -1;
	if (sandbox_adopted(c, id))
		return sandbox_adopted_dial(c, id, fd, key, err);
	if (!sandbox_has_init(c))
		return sbx_err_set(err, 500, "no_init", "sandboxes run without sbx-init (init_path is empty)");
	sandbox_paths(c, id, &p);
	if (chan_key_read(&p, key, err) < 0)
		return -1;
	if (chan_dial(&p, fd, err) < 0) {
		explicit_bzero(key, SBX_CHAN_KEY_LEN);
		return -1;
	}
	return 0;
}

int sandbox_connect(const struct sandbox_node_cfg *c, const char *id, int timeout_ms, int *fd,
		    sbx_err *err)
{
	uint8_t key[SBX_CHAN_KEY_LEN];
	struct sandbox_paths p;
	long t0, deadline;
	pid_t pid;

	if (check_cfg(c, id, err) < 0)
		return -1;
	if (sandbox_adopted(c, id))
		return sandbox_adopted_connect(c, id, timeout_ms, fd, err);
	if (!sandbox_has_init(c))
		return sbx_err_set(err, 500, "no_init", "sandboxes run without sbx-init (init_path is empty)");
	sandbox_paths(c, id, &p);
	if (chan_key_read(&p, key, err) < 0)
		return -1;
	t0 = sbx_now_ms();
	deadline = t0 + (timeout_ms > 0 ? timeout_ms : 5000);
	for (;;) {
		long left = deadline - sbx_now_ms();
		if (chan_connect_once(&p, id, key, left > 0 ? (int)left : 1, fd, err) == 0)
			return 0;
		pid = runsc_read_pidfile(&p);
		if (pid > 0 && !runsc_sentry_alive(pid, id))
			return sbx_err_set(err, 500, "sandbox", "sandbox died before sbx-init answered");
		if (sbx_now_ms() >= deadline)
			return sbx_err_ctx(err, "sbx-init not up within %d ms", timeout_ms);
		/* it listens ~10-20 ms after runsc returns: every ms of the wait
		 * is a create's (a try is three opens and a connect) */
		host_sleep_ms(sbx_now_ms() - t0 < 200 ? 1 : 5);
	}
}

/* ---- teardown ------------------------------------------------------------------ */

/* The address the network got, kept beside the sandbox (net-ip) so that
 * destroy need not list the node's table to find it (net.h). */
static void net_ip_write(const struct sandbox_paths *p, const char *ip)
{
	char path[600];
	FILE *f;

	sub_path(p, "net-ip", path, sizeof(path));
	f = fopen(path, "we");
	if (!f || fprintf(f, "%s\n", ip) < 0)
		log_warnx("sandbox %s: cannot keep its address in %s (destroy will list the table)", p->dir, path);
	if (f)
		fclose(f);
}

static void net_ip_read(const struct sandbox_paths *p, char ip[16])
{
	char path[600];
	FILE *f;

	ip[0] = '\0';
	sub_path(p, "net-ip", path, sizeof(path));
	f = fopen(path, "re");
	if (!f)
		return;
	if (!fgets(ip, 16, f))
		ip[0] = '\0';
	ip[strcspn(ip, "\n")] = '\0';
	fclose(f);
}

int sandbox_net_ip(const struct sandbox_node_cfg *c, const char *id, char ip[16])
{
	struct sandbox_paths p;

	ip[0] = '\0';
	if (!sbx_id_valid(id))
		return -1;
	sandbox_paths(c, id, &p);
	net_ip_read(&p, ip);
	return ip[0] ? 0 : -1;
}

int sandbox_egress_resolved_path(const struct sandbox_node_cfg *c, const char *id, char *out, size_t n)
{
	struct sandbox_paths p;

	if (!sbx_id_valid(id))
		return -1;
	sandbox_paths(c, id, &p);
	sub_path(&p, "egress-resolved", out, n);
	return 0;
}

/* The network goes from the uplink it was made in (sandbox.json records
 * it): net_sandbox_destroy_made_in. */
static int net_destroy_where_made(const struct sandbox_node_cfg *c, const struct sandbox_paths *p, const char *id,
				  sbx_err *err)
{
	char path[600], ip[16];
	json_t *j;
	int rc;

	sub_path(p, "sandbox.json", path, sizeof(path));
	j = json_load_file(path, 0, NULL);
	net_ip_read(p, ip);
	rc = net_sandbox_destroy_made_in(c->net, id, json_string_value(json_object_get(j, "uplink_netns")),
					 ip[0] ? ip : NULL, err);
	json_decref(j);
	return rc;
}

/* Where a start's or a destroy's time goes: each step's milliseconds,
 * logged when it ends (bench/create-latency and bench/density print them). */
struct step_clock {
	const char *step;
	long long t0, t; /* microseconds */
	char parts[300];
	size_t len;
};

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void step_to(struct step_clock *k, const char *next)
{
	long long now = now_us();

	if (k->step && *k->step && k->len < sizeof(k->parts)) {
		int n = snprintf(k->parts + k->len, sizeof(k->parts) - k->len, "%s%s %.1f", k->len ? ", " : "",
				 k->step, (double)(now - k->t) / 1000.0);
		if (n > 0)
			k->len += (size_t)n;
	}
	if (!k->t0)
		k->t0 = now;
	k->step = next;
	k->t = now;
}

static int teardown(const struct sandbox_node_cfg *c, const char *id, sbx_err *err)
{
	struct sandbox_paths p;
	sbx_err e2 = SBX_ERR_INIT;
	struct step_clock k = { 0 };
	bool keep_dir;
	int rc = 0, loop = -1;

	step_to(&k, "thaw");
	sandbox_paths(c, id, &p);
	/* a frozen sandbox's tasks take no signal, not even SIGKILL (idle.c) */
	if (sandbox_freeze_state(id) > SANDBOX_THAWED && sandbox_thaw(id, &e2) < 0)
		log_warnx("sandbox %s: %s", id, e2.msg);
	/* reverse order of start: container, rootfs/disk mounts, loop, network,
	 * cgroups, directory. Keep going after a failure so the most goes. */
	step_to(&k, "runsc");
	if (runsc_remove(c, &p, id, err) < 0) {
		/* A live container must not lose its disk under it. */
		return sbx_err_ctx(err, "destroy %s", id);
	}
	step_to(&k, "umount");
	if (disk_umount_known(p.dir, &loop) != 0 && disk_umount_all(p.dir, &loop, &e2) < 0 && rc == 0) {
		*err = e2;
		rc = -1;
	}
	step_to(&k, "loops");
	if (disk_loops_free(p.dir, loop, &e2) < 0 && rc == 0) {
		*err = e2;
		rc = -1;
	}
	/* the volume's image lives elsewhere: wait for its loop too, so the
	 * next sandbox can mount it */
	step_to(&k, "volume");
	if (volume_detach_wait(c, &p, &e2) < 0 && rc == 0) {
		*err = e2;
		rc = -1;
	}
	step_to(&k, "network");
	if (net_destroy_where_made(c, &p, id, &e2) < 0 && rc == 0) {
		*err = e2;
		rc = -1;
	}
	/* a cgroup still busy is not a failed destroy (the sandbox is gone):
	 * its directory stays so that the orphan pass comes back for it */
	step_to(&k, "cgroups");
	keep_dir = runsc_cgroups_remove(id, &e2) < 0;
	if (keep_dir)
		log_warnx("sandbox %s: %s; the orphan pass removes it later", id, e2.msg);
	step_to(&k, "dir");
	if (rc == 0 && !keep_dir && disk_rm_sandbox_dir(c, id, &e2) < 0) {
		/* a mount the start does not make (disk_umount_known): found by
		 * the scan, then the directory again */
		sbx_err_clear(&e2);
		if (disk_umount_all(p.dir, &loop, &e2) < 0 || disk_loops_free(p.dir, loop, &e2) < 0 ||
		    disk_rm_sandbox_dir(c, id, &e2) < 0) {
			*err = e2;
			rc = -1;
		}
	}
	step_to(&k, NULL);
	if (rc == 0)
		log_info("sandbox %s: torn down in %.1f ms (%s)", id, (double)(k.t - k.t0) / 1000.0, k.parts);
	return rc < 0 ? sbx_err_ctx(err, "destroy %s", id) : 0;
}

static bool sandbox_dir_exists(const struct sandbox_node_cfg *c, const char *id)
{
	struct sandbox_paths p;

	sandbox_paths(c, id, &p);
	return access(p.dir, F_OK) == 0;
}

int sandbox_destroy(const struct sandbox_node_cfg *c, const char *id, sbx_err *err)
{
	if (check_cfg(c, id, err) < 0)
		return -1;
	/* the volume mounted for Nomad's task (nomad_vol.h), adopted or not yet */
	if (nomad_vol_present(c, id) && nomad_vol_unmount(c, id, err) < 0)
		return -1;
	/* Nomad's allocation: the provisioner deregisters it, the node forgets it */
	if (sandbox_adopted(c, id))
		return sandbox_adopted_forget(c, id, err);
	/* Nomad's allocation whose network we wired, never adopted (a create
	 * that failed, a DEL that never came): only the network is ours */
	if (nomad_net_wired(c, id) && !sandbox_dir_exists(c, id))
		return nomad_net_unwire(c, id, err);
	sandbox_fault_point(c, "destroy-begin", id);
	return teardown(c, id, err);
}

/* ---- start ---------------------------------------------------------------------- */

/* /etc/resolv.conf names the gateway, whatever the mode: the policy may
 * change while the sandbox runs, and a file written from the host then would
 * not be seen. The node's forwarder answers there (egress_node.c); under
 * deny_all nothing does (input drops the query), so there is no resolver. */
static int write_resolv_conf(const struct sandbox_paths *p, const char *gw, sbx_err *err)
{
	cleanup_close int root = -1, etc = -1, fd = -1;
	char line[64];
	int n = snprintf(line, sizeof(line), "nameserver %s\noptions timeout:2 attempts:2\n", gw);

	root = open(p->rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root >= 0)
		etc = openat(root, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0)
		return sbx_err_sys(err, "sandbox", "open %s/etc", p->rootfs);
	/* the template's may be a symlink (systemd-resolved): replaced */
	if (unlinkat(etc, "resolv.conf", 0) < 0 && errno != ENOENT)
		return sbx_err_sys(err, "sandbox", "remove %s/etc/resolv.conf", p->rootfs);
	fd = openat(etc, "resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, line, (size_t)n) != n)
		return sbx_err_sys(err, "sandbox", "write %s/etc/resolv.conf", p->rootfs);
	return 0;
}

/* A test's fault point: with fault_points on and state_dir/faults/POINT.armed
 * present, the start process writes its pid to faults/POINT.ID.pid and stops
 * itself, so the test kills it at exactly this point instead of racing it.
 * Points: start-dir (the sandbox's directory exists), start-volume (its
 * volume is mounted on the host), start-runsc (runsc runs the container);
 * pause.c's pause-checkpoint, pause-saved, resume-restore and
 * resume-restored; snapshot.c's snapshot-copy and snapshot-frozen;
 * destroy-begin (a destroy process, before it takes anything down); the
 * provisioner's provision-ready is in provisioner.c. Not a stop but a hold:
 * chan-wait-hold (chan.c) keeps a channel's wait open past its 2 s, and
 * adopt-hold (node_start.c) a Nomad task's adoption from dialling. */
bool fault_armed(bool on, const char *state_dir, const char *point, const char *id)
{
	char path[700];

	if (!on || !state_dir || !*state_dir)
		return false;
	if (id)
		snprintf(path, sizeof(path), "%s/faults/%s.%s.armed", state_dir, point, id);
	else
		snprintf(path, sizeof(path), "%s/faults/%s.armed", state_dir, point);
	return access(path, F_OK) == 0;
}

void fault_point(bool on, const char *state_dir, const char *point, const char *id)
{
	char path[700], pid[24];
	cleanup_close int fd = -1;
	int n;

	if (!fault_armed(on, state_dir, point, NULL))
		return;
	snprintf(path, sizeof(path), "%s/faults/%s.%s.pid", state_dir, point, id);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (fd < 0 || write(fd, pid, (size_t)n) != n)
		return;
	log_info("sandbox %s: fault point %s: pid %d stops here", id, point, (int)getpid());
	raise(SIGSTOP);
}

void sandbox_fault_point(const struct sandbox_node_cfg *c, const char *point, const char *id)
{
	fault_point(c->fault_points, c->state_dir, point, id);
}

int sandbox_start(const struct sandbox_node_cfg *c, const struct sandbox_spec *s, sbx_err *err)
{
	struct sandbox_paths p;
	char lower[1500], digest[80], dir[600], key_hex[SBX_CHAN_KEY_HEX + 1] = "";
	json_t *image_env = NULL;
	struct net_sandbox ns;
	struct net_async na = NET_ASYNC_INIT;
	struct step_clock k = { 0 };
	bool warm = false;
	long long deadline = sbx_now_ms() + (c->start_timeout_ms > 0 ? c->start_timeout_ms : DEFAULT_START_TIMEOUT_MS);
	struct stat st;

	step_to(&k, "prepare");
	if (check_cfg(c, s->id, err) < 0)
		return -1;
	if (s->memory_mb < 16 || s->disk_gb < 1 || s->cpu < 1 || s->cpu > 64000)
		return sbx_err_set(err, 400, "sandbox", "bad specs (memory %d MB, disk %d GB, cpu %d)",
				   s->memory_mb, s->disk_gb, s->cpu);
	if (sandbox_has_init(c) && (stat(c->init_path, &st) < 0 || !S_ISREG(st.st_mode)))
		return sbx_err_sys(err, "sandbox_config", "init_path %s", c->init_path);
	if (s->image) {
		/* a snapshot's layers over its template (snapshot.c) */
		if (sandbox_image_resolve(c, s->image, lower, sizeof(lower), &image_env, err) < 0)
			return -1;
		snprintf(digest, sizeof(digest), "%s", strchr(s->image, '@') + 1);
	} else if (template_resolve(c, s->template, lower, sizeof(lower), digest, sizeof(digest), &image_env, err) < 0)
		return -1;
	if (!lowers_ok(lower)) {
		json_decref(image_env);
		return sbx_err_set(err, 500, "template", "odd template path %s", lower);
	}
	/* Sentries become our children when runsc detaches (sandbox.h). */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	sandbox_paths(c, s->id, &p);
	snprintf(dir, sizeof(dir), "%s/sandboxes", c->state_dir);
	mkdir(c->state_dir, 0700);
	mkdir(dir, 0700);
	mkdir(p.runsc_root, 0700);
	if (mkdir(p.dir, 0700) < 0) {
		json_decref(image_env);
		if (errno == EEXIST)
			return sbx_err_set(err, 409, "sandbox", "sandbox %s already exists on this node", s->id);
		return sbx_err_sys(err, "sandbox", "mkdir %s", p.dir);
	}

	sandbox_fault_point(c, "start-dir", s->id);
	/* runsc's cgroup moves pass while this start is under way (cgwarm.c;
	 * nothing to do in a start the node agent forked: it holds it) */
	cgwarm_begin();
	warm = true;
	step_to(&k, "intent");
	if (write_intent(c, s, &p, digest, err) < 0)
		goto fail;
	/* the network is made on a thread meanwhile: the steps to "network"
	 * are the disk's, "network" what is left of it then */
	net_sandbox_create_begin(&na, c->net, s->id);
	step_to(&k, "disk");
	if (disk_make(c, s, &p, err) < 0)
		goto fail;
	step_to(&k, "rootfs");
	if (disk_make_rootfs(&p, lower, sandbox_has_init(c), err) < 0)
		goto fail;
	if (s->volume_id) {
		step_to(&k, "volume");
		if (volume_attach(c, s, &p, err) < 0)
			goto fail;
		sandbox_fault_point(c, "start-volume", s->id);
	}
	step_to(&k, "channel");
	/* chan/ and tmp/ live on the sandbox's disk, so what the sandbox
	 * writes there counts against its size; /tmp is open to all users */
	if (mkdir(p.chan_dir, 0700) < 0 || mkdir(p.tmp_dir, 0700) < 0 || chmod(p.tmp_dir, 01777) < 0) {
		sbx_err_sys(err, "sandbox", "mkdir %s", p.chan_dir);
		goto fail;
	}
	/* a snapshot's /tmp is in its layer, under the mount of ours */
	step_to(&k, "tmp");
	if (s->image && disk_fill_tmp(&p, err) < 0)
		goto fail;
	step_to(&k, "key");
	if (sandbox_has_init(c) && chan_key_make(&p, key_hex, err) < 0)
		goto fail;
	step_to(&k, "network");
	if (net_sandbox_create_end(&na, &ns, err) < 0)
		goto fail;
	net_ip_write(&p, ns.ip);
	/* fail closed: a policy that cannot be installed fails the start */
	step_to(&k, "egress");
	if (write_resolv_conf(&p, ns.gw, err) < 0)
		goto fail;
	if (s->egress) {
		static struct dns_addrs res[SBX_EGRESS_MAX_ALLOW];
		char path[600];
		if (egress_apply_new(c->net, s->id, ns.ip, s->egress, res, err) < 0)
			goto fail;
		sub_path(&p, "egress-resolved", path, sizeof(path));
		if (egress_has_hosts(s->egress) && egress_resolved_save(path, s->egress, res) < 0)
			log_warn("sandbox %s: %s (its node agent asks the resolver again)", s->id, path);
	}
	step_to(&k, "bundle");
	if (oci_write_bundle(c, s, &p, lower, image_env, key_hex, err) < 0)
		goto fail;
	step_to(&k, "runsc");
	if (runsc_start(c, s, &p, deadline, err) < 0)
		goto fail;
	cgwarm_end();
	warm = false;
	sandbox_fault_point(c, "start-runsc", s->id);
	step_to(&k, "sbx-init");
	if (sandbox_has_init(c)) {
		int fd, left = (int)(deadline - sbx_now_ms());
		if (sandbox_connect(c, s->id, left > 100 ? left : 100, &fd, err) < 0)
			goto fail;
		close(fd);
	} else {
		char why[200];
		if (sandbox_alive(c, s->id, why, sizeof(why)) != 1) {
			sbx_err_set(err, 500, "sandbox", "sandbox not running after start: %s", why);
			goto fail;
		}
	}
	step_to(&k, NULL);
	log_info("sandbox %s: started in %.1f ms (%s)", s->id, (double)(k.t - k.t0) / 1000.0, k.parts);
	json_decref(image_env);
	explicit_bzero(key_hex, sizeof(key_hex));
	return 0;

fail:
	if (warm)
		cgwarm_end();
	/* whatever the thread makes is made before teardown looks */
	net_sandbox_create_end(&na, NULL, NULL);
	explicit_bzero(key_hex, sizeof(key_hex));
	json_decref(image_env);
	{
		sbx_err e2 = SBX_ERR_INIT;
		sbx_err_ctx(err, "start %s: step %s", s->id, k.step);
		if (teardown(c, s->id, &e2) < 0)
			log_warnx("sandbox %s: undo after failed start: %s", s->id, e2.msg);
	}
	return -1;
}

long sandbox_oom_kills(const char *id)
{
	return sbx_id_valid(id) ? runsc_oom_kills(id) : -1;
}

/* ---- alive and list ----------------------------------------------------------------- */

int sandbox_alive(const struct sandbox_node_cfg *c, const char *id, char *why, size_t whysz)
{
	struct sandbox_paths p;
	sbx_err err = SBX_ERR_INIT;
	pid_t pid;
	long ooms;

	if (whysz)
		why[0] = 0;
	if (check_cfg(c, id, &err) < 0) {
		snprintf(why, whysz, "%s", err.msg);
		return -1;
	}
	if (sandbox_adopted(c, id))
		return sandbox_adopted_alive(c, id, why, whysz);
	sandbox_paths(c, id, &p);
	pid = runsc_read_pidfile(&p);
	if (pid <= 0) {
		if (access(p.dir, F_OK) < 0) {
			snprintf(why, whysz, "no such sandbox on this node");
			return 0;
		}
		snprintf(why, whysz, "no sentry pid recorded");
		return -1;
	}
	if (runsc_sentry_alive(pid, id))
		return 1;
	ooms = runsc_oom_kills(id);
	if (ooms > 0)
		snprintf(why, whysz, "killed: out of memory (memory limit reached, %ld oom kill%s)", ooms,
			 ooms == 1 ? "" : "s");
	else
		snprintf(why, whysz, "sandbox process %d exited", (int)pid);
	return 0;
}

/* "PREFIX/<id>" or "PREFIX/<id>/..." */
static void idset_under(struct host_idset *s, const char *path, const char *prefix)
{
	size_t pl = strlen(prefix);

	if (strncmp(path, prefix, pl) == 0 && path[pl] == '/') {
		const char *id = path + pl + 1;
		size_t len = strcspn(id, "/");
		host_idset_add(s, id, len);
	}
}

void sandbox_list_free(char **ids, size_t n)
{
	host_strv_free(ids, n);
}

int sandbox_list(const struct sandbox_node_cfg *c, bool deep, char ***ids, size_t *n, sbx_err *err)
{
	struct host_idset s = { 0 };
	char sbdir[512], **v;
	size_t vn;
	int *devs;

	*ids = NULL;
	*n = 0;
	if (!path_ok(c->state_dir))
		return sbx_err_set(err, 500, "sandbox_config", "state_dir must be a plain absolute path");
	snprintf(sbdir, sizeof(sbdir), "%s/sandboxes", c->state_dir);
	/* 1. directories */
	(void)host_idset_add_dir(&s, sbdir);
	/* sandboxes Nomad runs here, adopted (adopt.c) */
	if (sandbox_adopted_list(c, &s) < 0) {
		sbx_err_sys(err, "sandbox", "list %s/nomad", c->state_dir);
		goto fail;
	}
	/* networks wired for Nomad's allocations (nomad_net.c) */
	if (nomad_net_list(c, &s) < 0) {
		sbx_err_sys(err, "sandbox", "list %s/nomad-net", c->state_dir);
		goto fail;
	}
	/* 2. runsc's containers */
	if (runsc_ids(c, &v, &vn, err) < 0)
		goto fail;
	for (size_t i = 0; i < vn; i++)
		host_idset_add(&s, v[i], strlen(v[i]));
	host_strv_free(v, vn);
	if (!deep)
		goto done;
	/* 3. mounts */
	if (disk_mounts_under(sbdir, &v, &vn) < 0) {
		sbx_err_sys(err, "sandbox", "read mountinfo");
		goto fail;
	}
	for (size_t i = 0; i < vn; i++)
		idset_under(&s, v[i], sbdir);
	host_strv_free(v, vn);
	/* 4. loop devices */
	if (disk_loops_under(sbdir, &devs, &v, &vn) == 0) {
		for (size_t i = 0; i < vn; i++)
			idset_under(&s, v[i], sbdir);
		free(devs);
		host_strv_free(v, vn);
	}
	/* Not net_list: network namespaces are named globally (/run/netns), so
	 * it also sees other node instances' sandboxes (tests, a second stack)
	 * and a reaper would tear down their network. The directory is made
	 * before the network and removed only after it, so every network
	 * leftover of ours has its directory here. */
done:
	if (host_idset_take(&s, ids, n) < 0)
		return sbx_err_set(err, 500, "sandbox", "out of memory listing sandboxes");
	return 0;
fail:
	host_idset_free(&s);
	return -1;
}
