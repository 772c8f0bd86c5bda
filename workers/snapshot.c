/* A snapshot of one running sandbox (sandbox.h): its overlay upper
 * directory (everything the sandbox wrote, deleted files as overlay
 * whiteouts) and its /tmp (on its disk, copy_tmp) are copied aside while
 * the sandbox's cgroup is frozen, so the copy is one moment of its
 * filesystem and no file is read half-written; the sandbox runs on right
 * after the copy. Extended attributes (user.*, file capabilities) go along
 * (cp -a, and the helper's pax headers). The copy is then packed as an
 * OCI layer on top of the image the sandbox started from and pushed to the
 * registry by the sbx-snapshot helper (shared tools and registry calls with
 * templates/build). Intermediate files live under
 * state_dir/snapshots/work/SNAPSHOT and go whatever happens (what a killed
 * process leaves, the node agent removes at its start). */
#include "config.h"
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include "cleanup.h"
#include "clock.h"
#include "docker.h"
#include "err.h"
#include "freezer.h"
#include "host.h"
#include "id.h"
#include "json.h"
#include "log.h"
#include "runsc.h"
#include "sandbox.h"

#define FREEZE_WAIT_MS 5000
#define COPY_TIMEOUT_MS 300000
#define PUSH_TIMEOUT_MS 900000
#define PULL_TIMEOUT_MS 120000

void sandbox_snapshot_workdir(const struct sandbox_node_cfg *c, const char *snap_id, char *out, size_t outsz)
{
	if (snap_id)
		snprintf(out, outsz, "%.300s/snapshots/work/%.24s", c->state_dir, snap_id);
	else
		snprintf(out, outsz, "%.300s/snapshots/work", c->state_dir);
}

int sandbox_image_of(const struct sandbox_node_cfg *c, const char *id, char *image, size_t isz, sbx_err *err)
{
	struct sandbox_paths p;
	char path[600];
	json_error_t je;
	const char *tmpl = NULL, *digest = NULL, *img = NULL;
	cleanup_json json_t *j = NULL;

	sandbox_paths(c, id, &p);
	snprintf(path, sizeof(path), "%s/sandbox.json", p.dir);
	if (!(j = json_load_file(path, 0, &je)))
		return sbx_err_set(err, 500, "sandbox", "read %s: %s", path, je.text);
	if (json_unpack_ex(j, &je, 0, "{s:s, s:s, s?s}", "template", &tmpl, "template_digest", &digest, "image", &img) < 0)
		return sbx_err_set(err, 500, "sandbox", "%s: %s", path, je.text);
	/* a sandbox restored from a snapshot stands on the snapshot's image */
	if (img)
		snprintf(image, isz, "%s", img);
	else
		snprintf(image, isz, "sbx/templates/%s@%s", tmpl, digest);
	return 0;
}

static int rm_tree(const char *dir)
{
	const char *argv[] = { "rm", "-rf", "--one-file-system", dir, NULL };
	cleanup_host_out struct host_out o = { 0 };
	sbx_err err = SBX_ERR_INIT;

	if (host_run_ok("rm", argv, NULL, &o, &err) < 0) {
		log_warnx("%s", err.msg);
		return -1;
	}
	return 0;
}

/* The sandbox's /tmp into the copy at DST/tmp. It is a directory on the
 * sandbox's disk bind-mounted over the image's /tmp (oci.c), not in the
 * upper directory, yet part of the filesystem the sandbox sees: all of it,
 * so the layer's /tmp is opaque (whiteouts() makes it the OCI marker) and
 * hides whatever the image below has there. */
static int copy_tmp(const struct sandbox_paths *p, const char *dst, struct host_run_opts *ro, sbx_err *err)
{
	char to[700];
	cleanup_host_out struct host_out o1 = { 0 }, o2 = { 0 };
	struct stat st;

	if (lstat(p->tmp_dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0; /* none (a sandbox made before /tmp moved to its disk) */
	snprintf(to, sizeof(to), "%s/tmp", dst);
	{
		/* what the upper directory had there is hidden by the mount */
		const char *argv[] = { "rm", "-rf", "--one-file-system", to, NULL };
		if (host_run_ok("rm", argv, ro, &o1, err) < 0)
			return -1;
	}
	{
		const char *argv[] = { "cp", "-a", "--one-file-system", p->tmp_dir, to, NULL };
		if (host_run_ok("copying /tmp", argv, ro, &o2, err) < 0)
			return -1;
	}
	if (lsetxattr(to, "trusted.overlay.opaque", "y", 1, 0) < 0)
		return sbx_err_sys(err, "snapshot", "mark %s opaque", to);
	return 0;
}

/* cp -a of the upper directory and of /tmp with every task of the sandbox
 * stopped. */
static int copy_frozen(const struct sandbox_node_cfg *c, const char *id, const struct sandbox_paths *p,
		       const char *upper, const char *dst, sbx_err *err)
{
	const char *argv[] = { "cp", "-a", "--one-file-system", upper, dst, NULL };
	cleanup_host_out struct host_out o = { 0 };
	struct host_run_opts ro = HOST_RUN_OPTS("snapshot");
	bool was_frozen = sandbox_freeze_state(id) == SANDBOX_FROZEN;
	long long deadline = sbx_now_ms() + FREEZE_WAIT_MS;
	int r;
	sbx_err e2 = SBX_ERR_INIT;

	if (!was_frozen) {
		if (sandbox_freeze(id, err) < 0)
			return sbx_err_ctx(err, "freezing the sandbox");
		while (sandbox_freeze_state(id) != SANDBOX_FROZEN) {
			if (sbx_now_ms() > deadline) {
				sandbox_thaw(id, &e2);
				return sbx_err_set(err, 500, "snapshot", "the sandbox did not freeze within %d ms",
						   FREEZE_WAIT_MS);
			}
			host_sleep_ms(2);
		}
	}
	/* frozen, not copied yet: where a killed node agent leaves the most
	 * behind (doc/testing.md) */
	sandbox_fault_point(c, "snapshot-frozen", id);
	ro.timeout_ms = COPY_TIMEOUT_MS;
	r = host_run_ok("copying the writable layer", argv, &ro, &o, err);
	if (r == 0)
		r = copy_tmp(p, dst, &ro, err);
	/* thawed whatever the copy did (one the idle pass froze stays so) */
	if (!was_frozen && sandbox_thaw(id, &e2) < 0)
		log_warnx("sandbox %s: thaw after the snapshot copy: %s", id, e2.msg);
	return r;
}

/* A sandbox Nomad runs (adopt.c): its writable layer is the overlay2 upper
 * directory Docker made for its container (runsc runs there with
 * --overlay2=none, doc/nomad.md, so what the sandbox writes reaches it
 * through the gofer), read while Docker holds the container paused; base:
 * the image it was pulled as. A container the user paused is not ready, so
 * never snapshotted: the thaw after the copy is always ours to do. */
static int adopted_copy(const struct sandbox_node_cfg *c, const char *id, const char *registry, const char *dst,
			char *base, size_t bsz, sbx_err *err)
{
	char name[128], upper[600];
	const char *sync_argv[] = { "/bin/sync", NULL };
	const char *argv[] = { "cp", "-a", "--one-file-system", upper, dst, NULL };
	cleanup_host_out struct host_out o = { 0 };
	struct host_run_opts ro = HOST_RUN_OPTS("snapshot");
	sbx_err e2 = SBX_ERR_INIT;
	int r;

	if (sandbox_adopted_container(c, id, name, sizeof(name), err) < 0 ||
	    docker_layer(c->docker_host, name, registry, base, bsz, upper, sizeof(upper), err) < 0)
		return -1;
	/* what the sandbox wrote and the sentry still holds reaches the host */
	if (docker_exec(c->docker_host, name, sync_argv, 30000, &e2) < 0)
		log_warnx("sandbox %s: sync before the snapshot: %s", id, e2.msg);
	sandbox_fault_point(c, "snapshot-copy", id);
	if (docker_pause(c->docker_host, name, true, err) < 0)
		return sbx_err_ctx(err, "freezing the sandbox");
	sandbox_fault_point(c, "snapshot-frozen", id);
	ro.timeout_ms = COPY_TIMEOUT_MS;
	r = host_run_ok("copying the writable layer", argv, &ro, &o, err);
	if (docker_pause(c->docker_host, name, false, &e2) < 0)
		log_warnx("sandbox %s: thaw after the snapshot copy: %s", id, e2.msg);
	return r;
}

int sandbox_snapshot(const struct sandbox_node_cfg *c, const char *id, const struct sandbox_snapshot_req *rq,
		     char *digest, size_t dsz, long long *bytes, sbx_err *err)
{
	struct sandbox_paths p;
	char work[600], copy[700], upper[600], base[400], repo[64], label[64], regflag[300];
	cleanup_host_out struct host_out o = { 0 };
	struct host_run_opts ro = HOST_RUN_OPTS("snapshot");
	sbx_err e2 = SBX_ERR_INIT;
	int r = -1;
	bool adopted;

	*bytes = 0;
	digest[0] = 0;
	if (!sbx_id_valid(id) || !sbx_id_valid(rq->snapshot_id))
		return sbx_err_set(err, 400, "snapshot", "bad sandbox or snapshot id");
	adopted = sandbox_adopted(c, id);
	sandbox_paths(c, id, &p);
	if (!adopted && sandbox_image_of(c, id, base, sizeof(base), err) < 0)
		return -1;
	snprintf(upper, sizeof(upper), "%s/upper", p.disk_mnt);
	sandbox_snapshot_workdir(c, NULL, work, sizeof(work));
	if (mkdir(work, 0700) < 0 && errno != EEXIST) {
		/* snapshots/ first */
		char parent[600];
		snprintf(parent, sizeof(parent), "%.300s/snapshots", c->state_dir);
		if ((mkdir(parent, 0700) < 0 && errno != EEXIST) || (mkdir(work, 0700) < 0 && errno != EEXIST))
			return sbx_err_sys(err, "snapshot", "mkdir %s", work);
	}
	sandbox_snapshot_workdir(c, rq->snapshot_id, work, sizeof(work));
	if (mkdir(work, 0700) < 0)
		return sbx_err_sys(err, "snapshot", "mkdir %s", work);
	snprintf(copy, sizeof(copy), "%s/upper", work);

	if (adopted) {
		if (adopted_copy(c, id, rq->registry, copy, base, sizeof(base), err) < 0) {
			sbx_err_ctx(err, "snapshot %s", rq->snapshot_id);
			goto out;
		}
	} else {
		/* what the sandbox wrote and the sentry still holds reaches the host */
		if (sandbox_has_init(c) && runsc_sync(c, &p, id, &e2) < 0)
			log_warnx("sandbox %s: sync before the snapshot: %s", id, e2.msg);
		sandbox_fault_point(c, "snapshot-copy", id);
		if (copy_frozen(c, id, &p, upper, copy, err) < 0) {
			sbx_err_ctx(err, "snapshot %s", rq->snapshot_id);
			goto out;
		}
	}
	snprintf(repo, sizeof(repo), "sbx/snapshots/%s", rq->snapshot_id);
	snprintf(label, sizeof(label), "org.sbx.snapshot.id=%s", rq->snapshot_id);
	snprintf(regflag, sizeof(regflag), "%s", rq->registry);
	{
		const char *argv[] = { rq->helper, "push", "--registry", regflag, "--dir", copy, "--work", work,
				       "--base", base, "--repo", repo, "--label", label, NULL };
		ro.timeout_ms = PUSH_TIMEOUT_MS;
		if (host_run_ok("sbx-snapshot push", argv, &ro, &o, err) < 0) {
			sbx_err_ctx(err, "snapshot %s", rq->snapshot_id);
			goto out;
		}
	}
	{
		char d[80] = "";
		long long b = -1;
		if (!o.out || sscanf(o.out, "%79s %lld", d, &b) != 2 || strncmp(d, "sha256:", 7) || strlen(d) != 71 ||
		    b < 0) {
			sbx_err_set(err, 500, "snapshot", "snapshot %s: the helper's answer is not DIGEST BYTES",
				    rq->snapshot_id);
			goto out;
		}
		snprintf(digest, dsz, "%s", d);
		*bytes = b;
	}
	r = 0;
out:
	rm_tree(work);
	return r;
}

/* sbx/snapshots/ID@sha256:HEX, and nothing else */
static bool image_ok(const char *s, char snap_id[SBX_ID_LEN + 1])
{
	static const char pre[] = "sbx/snapshots/";
	const char *at;

	if (strncmp(s, pre, sizeof(pre) - 1))
		return false;
	s += sizeof(pre) - 1;
	at = strchr(s, '@');
	if (!at || at - s != SBX_ID_LEN || strncmp(at, "@sha256:", 8) || strlen(at + 8) != 64 ||
	    strspn(at + 8, "0123456789abcdef") != 64)
		return false;
	memcpy(snap_id, s, SBX_ID_LEN);
	snap_id[SBX_ID_LEN] = 0;
	return sbx_id_valid(snap_id);
}

int sandbox_image_resolve(const struct sandbox_node_cfg *c, const char *image, char *lower, size_t lsz,
			  json_t **env, sbx_err *err)
{
	char snap[SBX_ID_LEN + 1], dest[600], tmpl[600], path[700];
	cleanup_host_out struct host_out o = { 0 };
	struct host_run_opts ro = HOST_RUN_OPTS("snapshot");
	cleanup_json json_t *j = NULL;
	json_error_t je;
	json_t *lowers, *v;
	size_t i, len = 0;

	*env = NULL;
	if (!image_ok(image, snap))
		return sbx_err_set(err, 400, "snapshot", "bad snapshot image '%.200s'", image);
	if (!c->snapshot_helper || !c->registry)
		return sbx_err_set(err, 500, "sandbox_config", "no snapshot helper or registry configured");
	snprintf(dest, sizeof(dest), "%.300s/snapshots/images/%s", c->state_dir, snap);
	snprintf(tmpl, sizeof(tmpl), "%.300s/templates", c->state_dir);
	{
		/* present already, or pulled now (the helper says which) */
		const char *argv[] = { c->snapshot_helper, "pull", "--registry", c->registry, "--image", image,
				       "--dest", dest, "--templates", tmpl, NULL };
		ro.timeout_ms = PULL_TIMEOUT_MS;
		if (host_run_ok("sbx-snapshot pull", argv, &ro, &o, err) < 0)
			return -1;
	}
	snprintf(path, sizeof(path), "%s/image.json", dest);
	if (!(j = json_load_file(path, 0, &je)))
		return sbx_err_set(err, 500, "snapshot", "read %s: %s", path, je.text);
	if (!json_is_string(json_object_get(j, "digest")) ||
	    strcmp(json_string_value(json_object_get(j, "digest")), strchr(image, '@') + 1))
		return sbx_err_set(err, 500, "snapshot", "%s is not of %s", path, image);
	lowers = json_object_get(j, "lowers");
	if (!json_is_array(lowers) || json_array_size(lowers) < 2)
		return sbx_err_set(err, 500, "snapshot", "%s names no lower directories", path);
	lower[0] = 0;
	json_array_foreach(lowers, i, v) {
		const char *l = json_string_value(v);
		int n;
		if (!l)
			return sbx_err_set(err, 500, "snapshot", "%s: a lower directory is not a string", path);
		n = snprintf(lower + len, lsz - len, "%s%s", i ? ":" : "", l);
		if (n < 0 || (size_t)n >= lsz - len)
			return sbx_err_set(err, 500, "snapshot", "%s: too many lower directories", path);
		len += (size_t)n;
	}
	v = json_object_get(j, "env");
	*env = json_is_array(v) ? json_incref(v) : json_array();
	return 0;
}
