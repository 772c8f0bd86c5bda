/* Volumes of sandboxes Nomad runs (driver = nomad, doc/nomad.md "Volumes"):
 * the volume is the node's own, as with the local driver (an ext4 image in
 * state_dir/volumes, volume.h); the job is pinned to the volume's node and
 * its task binds the host directory the node agent mounted the image on:
 *
 *   state_dir/nomad-volumes/SID       the image's ext4, mounted for sandbox
 *                                     SID before its job is registered
 *   state_dir/nomad-volumes/SID.vol   the volume's id (the note is written
 *                                     first, so a leftover is always named)
 *
 * Unmounted when the sandbox is destroyed here (sandbox_destroy, whether it
 * was adopted or its create failed before that) and by the node's volume
 * pass for a leftover no create can still be using. The host's mount goes
 * at once; the loop device (autoclear) goes with the task's own bind when
 * Docker stops the container, and until then a next attach is refused as
 * in use (volume_attach's rule: never two mounts of one ext4). */
#ifndef SBX_WORKER_NOMAD_VOL_H
#define SBX_WORKER_NOMAD_VOL_H

#include <stdbool.h>
#include <stddef.h>
#include "err.h"
#include "sandbox.h"

/* Mounts volume vid (made first, size_gb GB, when create: a persistent
 * sandbox's fresh volume) for sandbox sid; src := the host directory. A
 * missing image that is not to be made is 503 volume_missing, one still on
 * a loop device 409 volume_in_use. Mounted already for sid: success. */
int nomad_vol_mount(const struct sandbox_node_cfg *c, const char *sid, const char *vid, int size_gb, bool create,
		    char *src, size_t srcsz, sbx_err *err);
/* Unmounts sid's volume and removes its directory and note. Fine when
 * there is none. */
int nomad_vol_unmount(const struct sandbox_node_cfg *c, const char *sid, sbx_err *err);
/* sid has a volume directory or note here. */
bool nomad_vol_present(const struct sandbox_node_cfg *c, const char *sid);
/* Seconds since sid's note was written; -1 when it has none. */
long long nomad_vol_age_s(const struct sandbox_node_cfg *c, const char *sid);
/* The sandbox ids with a volume directory or note here, sorted; free with
 * host_strv_free. */
int nomad_vol_list(const struct sandbox_node_cfg *c, char ***ids, size_t *n, sbx_err *err);

#endif
