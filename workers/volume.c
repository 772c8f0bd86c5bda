/* Volumes on a node (volume.h): sparse ext4 images in state_dir/volumes,
 * mounted into one sandbox at a time the way its own disk is (disk.c: a
 * loop device with autoclear, ext4) and bound at its mount path (oci.c). */
#include "config.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cleanup.h"
#include "disk.h"
#include "err.h"
#include "host.h"
#include "id.h"
#include "volume.h"

static void volumes_dir(const struct sandbox_node_cfg *c, char *out, size_t outsz)
{
	snprintf(out, outsz, "%.300s/volumes", c->state_dir);
}

void volume_image_path(const struct sandbox_node_cfg *c, const char *vid, char *out, size_t outsz)
{
	snprintf(out, outsz, "%.300s/volumes/%.24s.img", c->state_dir, vid);
}

int volume_create(const struct sandbox_node_cfg *c, const char *vid, int size_gb, sbx_err *err)
{
	char dir[400], img[450], tmp[460];
	struct stat st;

	if (!sbx_id_valid(vid))
		return sbx_err_set(err, 400, "volume", "bad volume id");
	if (size_gb < 1 || size_gb > 100000)
		return sbx_err_set(err, 400, "volume", "bad volume size %d GB", size_gb);
	volumes_dir(c, dir, sizeof(dir));
	volume_image_path(c, vid, img, sizeof(img));
	snprintf(tmp, sizeof(tmp), "%s.tmp", img);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return sbx_err_sys(err, "volume", "mkdir %s", dir);
	if (lstat(img, &st) == 0) {
		if (S_ISREG(st.st_mode) && st.st_size == (off_t)size_gb << 30)
			return 0;
		return sbx_err_set(err, 409, "volume", "volume %s exists on this node with another size", vid);
	}
	/* a leftover of an interrupted create is ours to replace */
	if (unlink(tmp) < 0 && errno != ENOENT)
		return sbx_err_sys(err, "volume", "unlink %s", tmp);
	return disk_image_make(tmp, img, size_gb, "volume", err);
}

int volume_in_use(const struct sandbox_node_cfg *c, const char *vid)
{
	char img[450];
	int *devs;
	char **files;
	size_t n;

	volume_image_path(c, vid, img, sizeof(img));
	if (disk_loops_under(img, &devs, &files, &n) < 0)
		return -1;
	free(devs);
	host_strv_free(files, n);
	return n > 0;
}

int volume_delete(const struct sandbox_node_cfg *c, const char *vid, sbx_err *err)
{
	char img[450];
	int used;

	if (!sbx_id_valid(vid))
		return sbx_err_set(err, 400, "volume", "bad volume id");
	used = volume_in_use(c, vid);
	if (used < 0)
		return sbx_err_sys(err, "volume", "list /sys/block");
	if (used)
		return sbx_err_set(err, 409, "volume_in_use", "volume %s is still mounted on this node", vid);
	volume_image_path(c, vid, img, sizeof(img));
	if (unlink(img) < 0 && errno != ENOENT)
		return sbx_err_sys(err, "volume", "unlink %s", img);
	return volume_remove_tmp(c, vid, err);
}

int volume_remove_tmp(const struct sandbox_node_cfg *c, const char *vid, sbx_err *err)
{
	char img[450], tmp[460];

	volume_image_path(c, vid, img, sizeof(img));
	snprintf(tmp, sizeof(tmp), "%s.tmp", img);
	if (unlink(tmp) < 0 && errno != ENOENT)
		return sbx_err_sys(err, "volume", "unlink %s", tmp);
	return 0;
}

long long volume_promised_gb(const struct sandbox_node_cfg *c, long long *used_gb)
{
	char dir[400];
	DIR *d;
	struct dirent *e;
	long long gb = 0, used = 0;

	*used_gb = 0;
	volumes_dir(c, dir, sizeof(dir));
	if (!(d = opendir(dir)))
		return 0;
	while ((e = readdir(d))) {
		struct stat st;
		if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		gb += (long long)((st.st_size + (1LL << 30) - 1) >> 30);
		used += (long long)st.st_blocks * 512;
	}
	closedir(d);
	*used_gb = used >> 30;
	return gb;
}

int volume_list(const struct sandbox_node_cfg *c, char ***ids, bool **tmp, size_t *n, sbx_err *err)
{
	char dir[400];
	DIR *d;
	struct dirent *e;

	*ids = NULL;
	*tmp = NULL;
	*n = 0;
	volumes_dir(c, dir, sizeof(dir));
	if (!(d = opendir(dir)))
		return errno == ENOENT ? 0 : sbx_err_sys(err, "volume", "open %s", dir);
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		bool t = l == SBX_ID_LEN + 8 && !strcmp(e->d_name + SBX_ID_LEN, ".img.tmp");
		char id[SBX_ID_LEN + 1];
		char **ni;
		bool *nt;

		if (!t && !(l == SBX_ID_LEN + 4 && !strcmp(e->d_name + SBX_ID_LEN, ".img")))
			continue;
		memcpy(id, e->d_name, SBX_ID_LEN);
		id[SBX_ID_LEN] = 0;
		if (!sbx_id_valid(id))
			continue;
		ni = realloc(*ids, (*n + 1) * sizeof(**ids));
		if (ni)
			*ids = ni;
		nt = realloc(*tmp, (*n + 1) * sizeof(**tmp));
		if (nt)
			*tmp = nt;
		if (!ni || !nt || !((*ids)[*n] = strdup(id))) {
			closedir(d);
			return sbx_err_set(err, 500, "nomem", "listing volumes");
		}
		(*tmp)[(*n)++] = t;
	}
	closedir(d);
	return 0;
}

/* mkdir -p of an absolute path inside root, one component at a time and
 * never through a symlink: the root is the template's (or a snapshot's),
 * and a name in it must not lead the mount out of the sandbox. */
static int mkdir_in_root(const char *root, const char *path, sbx_err *err)
{
	char buf[256], *save = NULL, *comp;
	cleanup_close int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return sbx_err_sys(err, "volume", "open %s", root);
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return sbx_err_set(err, 400, "volume", "mount path too long");
	for (comp = strtok_r(buf, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
		int nfd;

		if (!strcmp(comp, ".") || !strcmp(comp, ".."))
			return sbx_err_set(err, 400, "volume", "mount path %s has . or ..", path);
		if (mkdirat(fd, comp, 0755) < 0 && errno != EEXIST)
			return sbx_err_sys(err, "volume", "mkdir %s in the sandbox", path);
		nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0)
			return errno == ELOOP || errno == ENOTDIR
				       ? sbx_err_set(err, 400, "volume", "mount path %s is not a directory in the image", path)
				       : sbx_err_sys(err, "volume", "open %s in the sandbox", path);
		close(fd);
		fd = nfd;
	}
	return 0;
}

int volume_ready(const struct sandbox_node_cfg *c, const char *vid, int size_gb, bool create, sbx_err *err)
{
	char img[450];
	struct stat st;
	int used;

	if (!sbx_id_valid(vid))
		return sbx_err_set(err, 400, "volume", "bad volume id");
	volume_image_path(c, vid, img, sizeof(img));
	if (lstat(img, &st) < 0) {
		if (errno != ENOENT)
			return sbx_err_sys(err, "volume", "stat %s", img);
		/* only a fresh volume (persistent: true) is made here; a missing
		 * image of an existing one is never replaced by an empty one */
		if (!create)
			return sbx_err_set(err, 503, "volume_missing", "volume %s is not on this node", vid);
		if (volume_create(c, vid, size_gb, err) < 0)
			return -1;
	} else if (!S_ISREG(st.st_mode)) {
		return sbx_err_set(err, 500, "volume", "%s is not a file", img);
	}
	/* ext4 mounted twice is a corrupted ext4: one sandbox at a time, and
	 * the last one's loop device must be gone */
	used = volume_in_use(c, vid);
	if (used != 0)
		return sbx_err_set(err, 409, "volume_in_use",
				   used < 0 ? "cannot tell whether volume %s is in use" : "volume %s is still in use on this node",
				   vid);
	return 0;
}

int volume_attach(const struct sandbox_node_cfg *c, const struct sandbox_spec *s,
		  const struct sandbox_paths *p, sbx_err *err)
{
	char img[450], mnt[600], note[600];
	cleanup_close int fd = -1;

	if (volume_ready(c, s->volume_id, s->volume_gb, s->volume_create, err) < 0)
		return -1;
	volume_image_path(c, s->volume_id, img, sizeof(img));
	/* the note first: teardown reads it to wait for this image's loop */
	snprintf(note, sizeof(note), "%s/volume.id", p->dir);
	fd = open(note, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, s->volume_id, SBX_ID_LEN) != SBX_ID_LEN)
		return sbx_err_sys(err, "volume", "write %s", note);
	if (mkdir_in_root(p->rootfs, s->mount_path, err) < 0)
		return -1;
	snprintf(mnt, sizeof(mnt), "%s/volume", p->dir);
	if (mkdir(mnt, 0700) < 0)
		return sbx_err_sys(err, "volume", "mkdir %s", mnt);
	return disk_loop_mount(img, mnt, err);
}

int volume_detach_wait(const struct sandbox_node_cfg *c, const struct sandbox_paths *p, sbx_err *err)
{
	char note[600], vid[SBX_ID_LEN + 1], img[450];
	cleanup_close int fd = -1;
	ssize_t r;

	snprintf(note, sizeof(note), "%s/volume.id", p->dir);
	fd = open(note, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	r = read(fd, vid, SBX_ID_LEN);
	if (r != SBX_ID_LEN)
		return 0;
	vid[SBX_ID_LEN] = 0;
	if (!sbx_id_valid(vid))
		return 0;
	volume_image_path(c, vid, img, sizeof(img));
	return disk_loops_free(img, -1, err);
}
