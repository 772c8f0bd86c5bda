/* libFuzzer target: what sbx's CNI plugin and the node agent read from
 * outside (workers/cni.c). Byte 0 picks one: CNI_ARGS (the rest, as Nomad's
 * client passes it) with the job id it names taken apart, or a request to
 * the node agent (JSON) unpacked and checked. What is taken stays
 * NUL-terminated in its buffer; a sandbox id is 24 lowercase hex; a request
 * that passes names a known command, a sandbox id, and an ADD its
 * allocation and network namespace. */
#include "config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(c) do { if (!(c)) __builtin_trap(); } while (0)

static void is_id(const char *id)
{
	require(strlen(id) == 24);
	for (int i = 0; i < 24; i++)
		require((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f'));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1) {
		char *args = malloc(size), job[200], alloc[16], id[25];

		if (!args)
			return 0;
		memcpy(args, data + 1, size - 1);
		args[size - 1] = 0;
		cni_arg(args, "NOMAD_JOB_ID", job, sizeof(job));
		require(strnlen(job, sizeof(job)) < sizeof(job));
		cni_arg(args, "NOMAD_ALLOC_ID", alloc, sizeof(alloc));
		require(strnlen(alloc, sizeof(alloc)) < sizeof(alloc));
		if (cni_sandbox_of(job, id))
			is_id(id);
		(void)cni_alloc_ok(alloc);
		free(args);
	} else {
		json_t *root = json_loadb((const char *)data + 1, size - 1, 0, NULL);
		struct cni_req r;
		char why[200];
		int code = cni_req_unpack(root, &r, why, sizeof(why));

		if (code == 0) {
			require(!strcmp(r.command, "ADD") || !strcmp(r.command, "DEL") || !strcmp(r.command, "CHECK"));
			is_id(r.sandbox_id);
			require(r.alloc_id && r.netns && r.ifname);
			require(!r.alloc_id[0] || cni_alloc_ok(r.alloc_id));
			require(strcmp(r.command, "ADD") || (r.alloc_id[0] && r.netns[0]));
		} else {
			require(strnlen(why, sizeof(why)) < sizeof(why) && why[0]);
		}
		json_decref(root);
	}
	return 0;
}
