/* Volumes on a node: one sparse ext4 image per volume in
 * state_dir/volumes/ID.img, made once, loop-mounted into the one sandbox
 * that has it attached (at sandboxes/SID/volume, bound at its mount path
 * by the OCI spec), and never removed with a sandbox. The image's size is a
 * hard limit (ENOSPC inside); it costs the host what was written. */
#ifndef SBX_WORKER_VOLUME_H
#define SBX_WORKER_VOLUME_H

#include <stdbool.h>
#include <stddef.h>
#include "err.h"
#include "sandbox.h"

/* state_dir/volumes/ID.img */
void volume_image_path(const struct sandbox_node_cfg *c, const char *vid, char *out, size_t outsz);
/* Makes the image of size_gb GB (sparse, ext4, root-owned 0755 root). The
 * image appears under its name only when complete (made as ID.img.tmp and
 * renamed), so an interrupted create leaves no half-made volume; one that
 * is already there with the same size is success (a repeated request). */
int volume_create(const struct sandbox_node_cfg *c, const char *vid, int size_gb, sbx_err *err);
/* Removes the image; refused (409) while a loop device still uses it. Fine
 * when it is gone. */
int volume_delete(const struct sandbox_node_cfg *c, const char *vid, sbx_err *err);
/* 1 when a loop device is backed by the image (it is mounted somewhere, or
 * its last user is on its way out), 0 when not, -1 when unknown. */
int volume_in_use(const struct sandbox_node_cfg *c, const char *vid);
/* GB the node has promised to volumes: the sum of their images' sizes;
 * *used_gb: what the images hold on the host disk already. */
long long volume_promised_gb(const struct sandbox_node_cfg *c, long long *used_gb);
/* Ids of the images in state_dir/volumes (and of leftover .tmp files, with
 * *tmp set per entry); free with host_strv_free / free. */
int volume_list(const struct sandbox_node_cfg *c, char ***ids, bool **tmp, size_t *n, sbx_err *err);
/* Removes a leftover ID.img.tmp of an interrupted create. */
int volume_remove_tmp(const struct sandbox_node_cfg *c, const char *vid, sbx_err *err);

/* Before a mount of volume vid: its image is there (made, size_gb GB, when
 * create: a persistent sandbox's fresh volume; a missing one that is not to
 * be made is 503 volume_missing) and no loop device holds it (409
 * volume_in_use). */
int volume_ready(const struct sandbox_node_cfg *c, const char *vid, int size_gb, bool create, sbx_err *err);
/* The sandbox's side (sandbox_start's "volume" step): the image on a loop
 * device mounted at sandboxes/SID/volume, and the mount point made inside
 * the sandbox's root. Undone by the sandbox's teardown (everything mounted
 * under its directory goes; volume_detach_wait then waits for the loop). */
int volume_attach(const struct sandbox_node_cfg *c, const struct sandbox_spec *s,
		  const struct sandbox_paths *p, sbx_err *err);
/* After the sandbox's mounts are gone: waits until no loop device uses the
 * image of the volume the sandbox had (named in its directory), detaching it
 * in the end, so the next sandbox may mount it. Fine without a volume. */
int volume_detach_wait(const struct sandbox_node_cfg *c, const struct sandbox_paths *p, sbx_err *err);

#endif
