/* libFuzzer target: what the node agent reads out of the Docker daemon's
 * answers and out of /proc/PID/cgroup (workers/docker_answer.c), outside
 * input for snapshots, pause and the stats of sandboxes Nomad runs. Byte 0
 * picks one: a container inspect (layer, pid), an image inspect (the
 * registry's RepoDigest), an error body, /proc/PID/cgroup's text. Whatever
 * is accepted is NUL-terminated text of the promised shape: an absolute
 * upper directory, a 71-byte image id, an sbx/ name with a sha256 digest, a
 * pid above 1, a relative cgroup path without "..". */
#include "config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "docker_answer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(c) do { if (!(c)) __builtin_trap(); } while (0)

static void terminated(const char *s, size_t sz)
{
	require(strnlen(s, sz) < sz);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sbx_err err = SBX_ERR_INIT;
	char *text;
	json_t *j;

	if (size < 1)
		return 0;
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = 0;
	j = json_loads(text, 0, NULL);
	switch (data[0] % 4) {
	case 0: {
		char upper[256], iid[80];
		long pid;
		if (docker_layer_of(j, "c", upper, sizeof(upper), iid, sizeof(iid), &err) == 0) {
			terminated(upper, sizeof(upper));
			require(upper[0] == '/' && !strstr(upper, "/../"));
			require(strlen(iid) == 71 && !strncmp(iid, "sha256:", 7));
		} else
			require(err.http == 503);
		err = (sbx_err)SBX_ERR_INIT;
		if (docker_pid_of(j, "c", &pid, &err) == 0)
			require(pid > 1);
		else
			require(pid == -1 && (err.http == 503 || err.http == 409));
		break;
	}
	case 1: {
		char base[128];
		if (docker_repo_digest_of(j, "127.0.0.1:25000", "c", base, sizeof(base), &err) == 0) {
			const char *at = strchr(base, '@');
			terminated(base, sizeof(base));
			require(!strncmp(base, "sbx/", 4) && at && !strncmp(at, "@sha256:", 8) && strlen(at) == 72);
			require(!strstr(base, ".."));
		} else
			require(err.http == 503);
		break;
	}
	case 2: {
		char msg[64];
		docker_message_of(text, msg, sizeof(msg));
		terminated(msg, sizeof(msg));
		require(!strchr(msg, '\n') && !strchr(msg, '\r'));
		break;
	}
	default: {
		char rel[64];
		if (docker_cgroup_of(text, rel, sizeof(rel)) == 0) {
			terminated(rel, sizeof(rel));
			require(rel[0] && rel[0] != '/' && rel[strlen(rel) - 1] != '/');
			require(!strstr(rel, "//") && strcmp(rel, "..") && strncmp(rel, "../", 3) && !strstr(rel, "/../"));
		}
		break;
	}
	}
	json_decref(j);
	free(text);
	return 0;
}
