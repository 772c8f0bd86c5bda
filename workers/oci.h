/* The OCI bundle of a sandbox (bundle/config.json), and where things are
 * inside the sandbox that the bundle puts there. */
#ifndef SBX_WORKER_OCI_H
#define SBX_WORKER_OCI_H

#include <jansson.h>
#include "err.h"
#include "sandbox.h"

#define INIT_IN_SANDBOX "/.sbx/sbx-init" /* sbx-init, bound read-only */
#define CHAN_IN_SANDBOX "/run/sbx"       /* disk/chan/, bound: sbx-init's channel */
#define CHAN_SOCK_NAME "channel.sock"

/* Makes bundle/ and writes config.json (0600: it holds the channel key):
 * the process (sbx-init with key_hex and the sandbox id in its environment,
 * or a stand-in), env (defaults, then image_env, then the sandbox's), limits,
 * mounts (/run/sbx and /tmp from the sandbox's disk), namespaces; the
 * capabilities are the default set plus what the template under LOWER
 * (overlay lowerdir list, the template's rootfs last) asks for in its
 * image.json ("capabilities"), from a short allowed list. */
int oci_write_bundle(const struct sandbox_node_cfg *c, const struct sandbox_spec *s,
		     const struct sandbox_paths *p, const char *lower, json_t *image_env, const char *key_hex,
		     sbx_err *err);

#endif
