/* A sandbox's disk and mounts on the host: the sparse ext4 image on a loop
 * device (disk/), the overlay root on it (rootfs/), and, for destroy and
 * list, finding what is still mounted or attached under a directory and
 * removing it. */
#ifndef SBX_WORKER_DISK_H
#define SBX_WORKER_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include "err.h"
#include "sandbox.h"

/* disk.img of s->disk_gb GB, ext4 (a copy of the node's empty image of that
 * size, made on first use under state_dir/disk-templates), on a loop device
 * (autoclear) mounted at disk/ with upper/ and work/ for the overlay. */
int disk_make(const struct sandbox_node_cfg *c, const struct sandbox_spec *s, const struct sandbox_paths *p,
	      sbx_err *err);
/* An empty ext4 image of gb GiB (sparse) at path: made at tmp, which is
 * removed on failure, fsync'd and renamed once whole. Also volume.c's. */
int disk_image_make(const char *tmp, const char *path, int gb, const char *kind, sbx_err *err);
/* The overlay of lower (the template) and disk/ at rootfs/, with the mount
 * points of the bundle's binds made in it (sbx-init's only with_init). */
int disk_make_rootfs(const struct sandbox_paths *p, const char *lower, bool with_init, sbx_err *err);
/* For a sandbox made from a snapshot: the image's /tmp (rootfs/tmp, a
 * directory of the snapshot's layer) copied into the sandbox's own /tmp on
 * its disk (tmp_dir, which is mounted over it), attributes and all. */
int disk_fill_tmp(const struct sandbox_paths *p, sbx_err *err);

/* Attaches img to a free loop device with autoclear (it detaches itself
 * when its last user, the mount, goes) and mounts the ext4 on it at mnt
 * (nosuid, nodev, noatime). Also volume.c's. */
int disk_loop_mount(const char *img, const char *mnt, sbx_err *err);

/* Mount points at or below dir in our namespace, deepest first; free with
 * host_strv_free. < 0 when mountinfo cannot be read. */
int disk_mounts_under(const char *dir, char ***out, size_t *n);
/* Unmounts everything at or below dir (busy ones lazily, in the end);
 * *loop (when not NULL): the minor of the loop device one of the mounts
 * stood on, -1 when none did. */
int disk_umount_all(const char *dir, int *loop, sbx_err *err);
/* disk_umount_all for the mount points a sandbox's start makes under dir
 * (rootfs, volume, disk), without reading mountinfo: 0 when each is
 * unmounted or was none, 1 when one is busy (the caller then scans with
 * disk_umount_all). A mount it does not know stays, and
 * disk_rm_sandbox_dir never enters it: the caller scans when that fails. */
int disk_umount_known(const char *dir, int *loop);
/* Loop devices (numbers, backing files) whose backing file is under dir;
 * free devs with free() and files with host_strv_free. */
int disk_loops_under(const char *dir, int **devs, char ***files, size_t *n);
/* Waits for the loop devices under dir to go, detaching them after 5 s.
 * known >= 0: the one device that can be there (the sandbox's disk, whose
 * mount was just removed: disk_umount_all), watched without a scan of
 * every loop device of the node; -1: scan. */
int disk_loops_free(const char *dir, int known, sbx_err *err);
/* Removes state_dir/sandboxes/ID, never following a symlink or entering a
 * mount that is still there. Fine when it is gone. */
int disk_rm_sandbox_dir(const struct sandbox_node_cfg *c, const char *id, sbx_err *err);

#endif
