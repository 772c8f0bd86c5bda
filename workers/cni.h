/* The parts of sbx's CNI exchange that read outside input, apart so that
 * both ends share them and a fuzz target reaches them (fuzz/fuzz_cni.c):
 * sbx-cni reads Nomad's CNI_ARGS and job id, the node agent the plugin's
 * request (nomad_net.c). libc and jansson only: sbx-cni links nothing else. */
#ifndef SBX_CNI_H
#define SBX_CNI_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

/* CNI's well-known error codes (the spec's "Error" section) */
#define CNI_E_UNKNOWN_CONTAINER 3
#define CNI_E_INVALID_ENV 4
#define CNI_E_IO 5
#define CNI_E_DECODE 6
#define CNI_E_TRY_LATER 11

/* The value of KEY in CNI_ARGS ("K=V;K=V"), copied into out (truncated to
 * sz - 1 bytes); "" when absent. */
void cni_arg(const char *args, const char *key, char *out, size_t sz);
/* "sbx-<24 lowercase hex>" -> the sandbox id; 0 when it is not one of ours. */
int cni_sandbox_of(const char *job, char id[25]);
/* Nomad's allocation ids are UUIDs: plain hex and dashes, 8 to 64 bytes. */
bool cni_alloc_ok(const char *s);

/* sbx-cni's request to the node agent: {"command", "sandbox_id",
 * "alloc_id"?, "netns"?, "ifname"?}. The strings point into the JSON. */
struct cni_req {
	const char *command, *sandbox_id, *alloc_id, *netns, *ifname;
};
/* Unpacks and checks one (command ADD, DEL or CHECK; a sandbox id; an
 * allocation id when given; ADD with its allocation and netns): 0, or a CNI
 * error code with why. */
int cni_req_unpack(json_t *root, struct cni_req *r, char *why, size_t whysz);

#endif
