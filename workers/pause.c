/* Pause and resume of one sandbox on this node (sandbox.h): runsc
 * checkpoint and restore, which keep its processes and their memory.
 *
 * Measured here (runsc 20240729, systrap, kernel 6.18): checkpoint and
 * restore of a sandbox with its own network namespace work, and a process's
 * in-memory counter goes on after the restore; but gVisor refuses to save a
 * socket bound to the host ("Cannot save endpoint with bound host socket"),
 * and sbx-init's channel is one. So sbx-init closes its channel on SIGUSR1
 * (connections, listener, then the socket file: its absence is the signal
 * that it is done) and binds it again on SIGUSR2 after the restore.
 *
 * On disk, a complete checkpoint is checkpoint/ in the sandbox's directory
 * (written as checkpoint.tmp/ and renamed): that rename is the moment the
 * sandbox is paused, whatever happens to the process doing it. */
#include "config.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cgwarm.h"
#include "cleanup.h"
#include "clock.h"
#include "err.h"
#include "host.h"
#include "id.h"
#include "log.h"
#include "runsc.h"
#include "sandbox.h"

#define QUIESCE_MS 5000
#define CHECKPOINT_MS 120000
#define RESUME_MS 60000

static void ckpt_paths(const struct sandbox_paths *p, char *ckpt, char *tmp, size_t sz)
{
	snprintf(ckpt, sz, "%s/checkpoint", p->dir);
	snprintf(tmp, sz, "%s/checkpoint.tmp", p->dir);
}

/* The checkpoint directory holds plain files only (runsc's images). */
static long long rm_flat_dir(const char *dir, bool remove)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	long long bytes = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		struct stat st;
		if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			bytes += (long long)st.st_blocks * 512;
		if (remove)
			unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
	if (remove)
		rmdir(dir);
	return bytes;
}

int sandbox_paused(const struct sandbox_node_cfg *c, const char *id)
{
	struct sandbox_paths p;
	char ckpt[600], tmp[600];
	struct stat st;

	if (!sbx_id_valid(id))
		return 0;
	if (sandbox_adopted(c, id))
		return sandbox_adopted_paused(c, id);
	sandbox_paths(c, id, &p);
	ckpt_paths(&p, ckpt, tmp, sizeof(ckpt));
	return lstat(ckpt, &st) == 0 && S_ISDIR(st.st_mode);
}

int sandbox_pause(const struct sandbox_node_cfg *c, const char *id, long long *bytes, sbx_err *err)
{
	struct sandbox_paths p;
	char ckpt[600], tmp[600], why[200];
	struct stat st;
	long long deadline;

	*bytes = 0;
	if (!sbx_id_valid(id))
		return sbx_err_set(err, 400, "sandbox", "bad sandbox id");
	if (sandbox_adopted(c, id))
		return sandbox_adopted_pause(c, id, true, err); /* frozen in place: nothing on disk */
	sandbox_paths(c, id, &p);
	ckpt_paths(&p, ckpt, tmp, sizeof(ckpt));
	if (sandbox_paused(c, id)) {
		/* done before (a repeated request, or a pause interrupted after
		 * the rename): only the container may still be there */
		*bytes = rm_flat_dir(ckpt, false);
		return runsc_remove(c, &p, id, err);
	}
	if (sandbox_alive(c, id, why, sizeof(why)) != 1)
		return sbx_err_set(err, 409, "sandbox", "pause %s: the sandbox is not running (%s)", id, why);
	rm_flat_dir(tmp, true);
	if (sandbox_has_init(c)) {
		if (runsc_signal(c, &p, id, "USR1", err) < 0)
			return sbx_err_ctx(err, "pause %s: closing the channel", id);
		for (deadline = sbx_now_ms() + QUIESCE_MS; lstat(p.chan_sock, &st) == 0;) {
			if (sbx_now_ms() > deadline) {
				runsc_signal(c, &p, id, "USR2", err);
				return sbx_err_set(err, 500, "sandbox", "pause %s: sbx-init did not close its channel", id);
			}
			host_sleep_ms(5);
		}
	}
	/* the channel is closed, the checkpoint not begun: the hardest
	 * moment to be killed at (doc/testing.md) */
	sandbox_fault_point(c, "pause-checkpoint", id);
	if (mkdir(tmp, 0700) < 0) {
		sbx_err_sys(err, "sandbox", "mkdir %s", tmp);
		goto undo;
	}
	if (runsc_checkpoint(c, &p, id, tmp, CHECKPOINT_MS, err) < 0) {
		sbx_err_ctx(err, "pause %s", id);
		goto undo;
	}
	if (rename(tmp, ckpt) < 0) {
		sbx_err_sys(err, "sandbox", "rename %s", tmp);
		goto undo;
	}
	*bytes = rm_flat_dir(ckpt, false);
	/* paused on disk, the stopped container still known to runsc and
	 * the record still pausing (doc/testing.md) */
	sandbox_fault_point(c, "pause-saved", id);
	/* the checkpoint stopped it; runsc still knows the container */
	if (runsc_remove(c, &p, id, err) < 0)
		return sbx_err_ctx(err, "pause %s: removing the stopped container", id);
	return 0;
undo:
	rm_flat_dir(tmp, true);
	if (sandbox_has_init(c)) {
		sbx_err e2 = SBX_ERR_INIT;
		if (runsc_signal(c, &p, id, "USR2", &e2) < 0)
			log_warnx("sandbox %s: channel not reopened after a failed pause: %s", id, e2.msg);
	}
	return -1;
}

/* An adopted sandbox's resume: thawed, then sbx-init's handshake proves it
 * answers again (the channel's socket stayed: frozen, not closed). */
static int sandbox_adopted_resume(const struct sandbox_node_cfg *c, const char *id, long long deadline, sbx_err *err)
{
	long long left;
	int fd;

	if (!sandbox_adopted_paused(c, id))
		return sbx_err_set(err, 409, "sandbox", "resume %s: it is not paused on this node", id);
	sandbox_fault_point(c, "resume-restore", id);
	if (sandbox_adopted_pause(c, id, false, err) < 0)
		return -1;
	left = deadline - sbx_now_ms();
	if (sandbox_connect(c, id, left > 1000 ? (int)left : 1000, &fd, err) < 0)
		return sbx_err_ctx(err, "resume %s", id);
	close(fd);
	return 0;
}

int sandbox_resume(const struct sandbox_node_cfg *c, const char *id, sbx_err *err)
{
	struct sandbox_paths p;
	char ckpt[600], tmp[600];
	sbx_err e2 = SBX_ERR_INIT;
	long long deadline = sbx_now_ms() + RESUME_MS;
	int rc;

	if (!sbx_id_valid(id))
		return sbx_err_set(err, 400, "sandbox", "bad sandbox id");
	if (sandbox_adopted(c, id))
		return sandbox_adopted_resume(c, id, deadline, err);
	sandbox_paths(c, id, &p);
	ckpt_paths(&p, ckpt, tmp, sizeof(ckpt));
	if (!sandbox_paused(c, id))
		return sbx_err_set(err, 409, "sandbox", "resume %s: no checkpoint on this node", id);
	/* runsc's cgroup moves pass (cgwarm.c; held by the node agent when
	 * it forked this resume) */
	cgwarm_begin();
	/* whatever an interrupted resume left running goes first */
	if (runsc_remove(c, &p, id, err) < 0) {
		cgwarm_end();
		return sbx_err_ctx(err, "resume %s", id);
	}
	sandbox_fault_point(c, "resume-restore", id);
	rc = runsc_restore(c, &p, id, ckpt, deadline, err);
	cgwarm_end();
	if (rc < 0) {
		sbx_err_ctx(err, "resume %s", id);
		goto undo;
	}
	/* restored and running beside its checkpoint, its channel still
	 * closed (doc/testing.md) */
	sandbox_fault_point(c, "resume-restored", id);
	if (sandbox_has_init(c)) {
		int fd;
		long long left;
		if (runsc_signal(c, &p, id, "USR2", err) < 0) {
			sbx_err_ctx(err, "resume %s: reopening the channel", id);
			goto undo;
		}
		left = deadline - sbx_now_ms();
		if (sandbox_connect(c, id, left > 1000 ? (int)left : 1000, &fd, err) < 0) {
			sbx_err_ctx(err, "resume %s", id);
			goto undo;
		}
		close(fd);
	}
	rm_flat_dir(ckpt, true);
	return 0;
undo:
	if (runsc_remove(c, &p, id, &e2) < 0)
		log_warnx("sandbox %s: undo after a failed resume: %s", id, e2.msg);
	return -1;
}

int sandbox_resume_finish(const struct sandbox_node_cfg *c, const char *id, sbx_err *err)
{
	struct sandbox_paths p;
	char ckpt[600], tmp[600];

	if (!sbx_id_valid(id))
		return sbx_err_set(err, 400, "sandbox", "bad sandbox id");
	if (sandbox_adopted(c, id))
		return sandbox_adopted_pause(c, id, false, err); /* thawed (409 not paused: done) */
	sandbox_paths(c, id, &p);
	ckpt_paths(&p, ckpt, tmp, sizeof(ckpt));
	if (sandbox_has_init(c) && runsc_signal(c, &p, id, "USR2", err) < 0)
		return sbx_err_ctx(err, "resume %s: reopening the channel", id);
	rm_flat_dir(ckpt, true);
	return 0;
}
