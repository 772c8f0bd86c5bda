/* The OCI bundle of a sandbox (bundle/config.json), and where things are
 * inside the sandbox that the bundle puts there. */
#ifndef SBX_WORKER_OCI_H
#define SBX_WORKER_OCI_H

#include <jansson.h>
#include "err.h"
#include "sandbox.h"

#define INIT_IN_SANDBOX "/.sbx/sbx-init" /* sbx-init, bound read-only */
#define CHAN_IN_SANDBOX "/run/sbx"       /* chan/, bound: sbx-init's channel */
#define CHAN_SOCK_NAME "channel.sock"

/* Makes bundle/ and writes config.json: the process (sbx-init, or a
 * stand-in), env (defaults, then image_env, then the sandbox's), limits,
 * mounts, namespaces (the sandbox's netns). */
int oci_write_bundle(const struct sandbox_node_cfg *c, const struct sandbox_spec *s,
		     const struct sandbox_paths *p, json_t *image_env, sbx_err *err);

#endif
