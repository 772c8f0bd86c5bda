/* The host side of the volumes of sandboxes Nomad runs (nomad_vol.h). */
#include "config.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "cleanup.h"
#include "disk.h"
#include "host.h"
#include "id.h"
#include "nomad_vol.h"
#include "volume.h"

static void vol_dir(const struct sandbox_node_cfg *c, char *out, size_t sz)
{
	snprintf(out, sz, "%.300s/nomad-volumes", c->state_dir);
}

static void vol_paths(const struct sandbox_node_cfg *c, const char *sid, char *mnt, size_t msz, char *note,
		      size_t nsz)
{
	char d[400];

	vol_dir(c, d, sizeof(d));
	snprintf(mnt, msz, "%s/%.24s", d, sid);
	snprintf(note, nsz, "%s/%.24s.vol", d, sid);
}

/* mnt is a mount point (its device differs from its parent's). */
static bool mounted(const char *mnt)
{
	char parent[600];
	struct stat a, b;

	snprintf(parent, sizeof(parent), "%s/..", mnt);
	return lstat(mnt, &a) == 0 && S_ISDIR(a.st_mode) && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

/* The volume id in sid's note ("" when none). */
static void read_note(const char *note, char vid[SBX_ID_LEN + 1])
{
	cleanup_close int fd = open(note, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	vid[0] = 0;
	if (fd >= 0 && read(fd, vid, SBX_ID_LEN) == SBX_ID_LEN) {
		vid[SBX_ID_LEN] = 0;
		if (!sbx_id_valid(vid))
			vid[0] = 0;
	}
}

int nomad_vol_mount(const struct sandbox_node_cfg *c, const char *sid, const char *vid, int size_gb, bool create,
		    char *src, size_t srcsz, sbx_err *err)
{
	char d[400], mnt[450], note[460], img[450], had[SBX_ID_LEN + 1];
	cleanup_close int fd = -1;

	if (!sbx_id_valid(sid) || !sbx_id_valid(vid))
		return sbx_err_set(err, 400, "volume", "bad sandbox or volume id");
	vol_paths(c, sid, mnt, sizeof(mnt), note, sizeof(note));
	if ((size_t)snprintf(src, srcsz, "%s", mnt) >= srcsz)
		return sbx_err_set(err, 500, "volume", "the volume's host path is too long");
	read_note(note, had);
	if (!strcmp(had, vid) && mounted(mnt))
		return 0; /* a repeated request */
	if (had[0] && strcmp(had, vid))
		return sbx_err_set(err, 409, "volume_in_use", "sandbox %s has volume %s mounted here already", sid, had);
	if (volume_ready(c, vid, size_gb, create, err) < 0)
		return -1;
	volume_image_path(c, vid, img, sizeof(img));
	vol_dir(c, d, sizeof(d));
	if (mkdir(d, 0700) < 0 && errno != EEXIST)
		return sbx_err_sys(err, "volume", "mkdir %s", d);
	/* the note first: a leftover mount is always named */
	fd = open(note, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, vid, SBX_ID_LEN) != SBX_ID_LEN)
		return sbx_err_sys(err, "volume", "write %s", note);
	if (mkdir(mnt, 0755) < 0 && errno != EEXIST)
		return sbx_err_sys(err, "volume", "mkdir %s", mnt);
	if (disk_loop_mount(img, mnt, err) < 0) {
		sbx_err e2 = SBX_ERR_INIT;
		nomad_vol_unmount(c, sid, &e2);
		return -1;
	}
	return 0;
}

int nomad_vol_unmount(const struct sandbox_node_cfg *c, const char *sid, sbx_err *err)
{
	char mnt[450], note[460];

	if (!sbx_id_valid(sid))
		return sbx_err_set(err, 400, "volume", "bad sandbox id");
	vol_paths(c, sid, mnt, sizeof(mnt), note, sizeof(note));
	/* detached: the task's own bind keeps the ext4 until its container ends */
	for (int i = 0; i < 8 && mounted(mnt); i++)
		if (umount2(mnt, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
			return sbx_err_sys(err, "volume", "umount %s", mnt);
	if (rmdir(mnt) < 0 && errno != ENOENT)
		return sbx_err_sys(err, "volume", "rmdir %s", mnt);
	if (unlink(note) < 0 && errno != ENOENT)
		return sbx_err_sys(err, "volume", "unlink %s", note);
	return 0;
}

bool nomad_vol_present(const struct sandbox_node_cfg *c, const char *sid)
{
	char mnt[450], note[460];

	if (!sbx_id_valid(sid))
		return false;
	vol_paths(c, sid, mnt, sizeof(mnt), note, sizeof(note));
	return access(note, F_OK) == 0 || access(mnt, F_OK) == 0;
}

long long nomad_vol_age_s(const struct sandbox_node_cfg *c, const char *sid)
{
	char mnt[450], note[460];
	struct stat st;

	vol_paths(c, sid, mnt, sizeof(mnt), note, sizeof(note));
	if (lstat(note, &st) < 0 && lstat(mnt, &st) < 0)
		return -1;
	return (long long)(time(NULL) - st.st_mtime);
}

int nomad_vol_list(const struct sandbox_node_cfg *c, char ***ids, size_t *n, sbx_err *err)
{
	struct host_idset s = { 0 };
	char d[400];
	DIR *dir;
	struct dirent *e;

	*ids = NULL;
	*n = 0;
	vol_dir(c, d, sizeof(d));
	dir = opendir(d);
	if (!dir)
		return errno == ENOENT ? 0 : sbx_err_sys(err, "volume", "opendir %s", d);
	while ((e = readdir(dir))) {
		size_t l = strlen(e->d_name);
		if (l == SBX_ID_LEN || (l == SBX_ID_LEN + 4 && !strcmp(e->d_name + SBX_ID_LEN, ".vol")))
			host_idset_add(&s, e->d_name, SBX_ID_LEN);
	}
	closedir(dir);
	if (host_idset_take(&s, ids, n) < 0)
		return sbx_err_set(err, 500, "nomem", "listing %s", d);
	return 0;
}
