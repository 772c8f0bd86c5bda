/* sbx's CNI exchange: what its two ends read from outside (cni.h). */
#include "config.h"
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include "cni.h"

void cni_arg(const char *args, const char *key, char *out, size_t sz)
{
	size_t kl = strlen(key);
	const char *p = args;

	out[0] = 0;
	while (p && *p) {
		size_t n = strcspn(p, ";");
		if (n > kl && !strncmp(p, key, kl) && p[kl] == '=') {
			snprintf(out, sz, "%.*s", (int)(n - kl - 1), p + kl + 1);
			return;
		}
		p += n;
		p += *p == ';';
	}
}

static bool hex24(const char *s)
{
	for (int i = 0; i < 24; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return false;
	return s[24] == 0;
}

int cni_sandbox_of(const char *job, char id[25])
{
	if (strncmp(job, "sbx-", 4) != 0 || strlen(job) != 28 || !hex24(job + 4))
		return 0;
	memcpy(id, job + 4, 25);
	return 1;
}

bool cni_alloc_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n < 8 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(isxdigit((unsigned char)s[i]) || s[i] == '-'))
			return false;
	return true;
}

int cni_req_unpack(json_t *root, struct cni_req *r, char *why, size_t whysz)
{
	json_error_t jerr;

	*r = (struct cni_req){ .alloc_id = "", .netns = "", .ifname = "eth0" };
	if (!root || json_unpack_ex(root, &jerr, JSON_STRICT, "{s:s, s:s, s?s, s?s, s?s}", "command", &r->command,
				    "sandbox_id", &r->sandbox_id, "alloc_id", &r->alloc_id, "netns", &r->netns, "ifname",
				    &r->ifname) < 0) {
		snprintf(why, whysz, "sbx: malformed request: %s", root ? jerr.text : "not JSON");
		return CNI_E_DECODE;
	}
	if (strlen(r->sandbox_id) != 24 || !hex24(r->sandbox_id)) {
		snprintf(why, whysz, "sbx: not a sandbox id: '%.40s'", r->sandbox_id);
		return CNI_E_INVALID_ENV;
	}
	if (r->alloc_id[0] && !cni_alloc_ok(r->alloc_id)) {
		snprintf(why, whysz, "sbx: not an allocation id: '%.70s'", r->alloc_id);
		return CNI_E_INVALID_ENV;
	}
	if (strcmp(r->command, "ADD") && strcmp(r->command, "DEL") && strcmp(r->command, "CHECK")) {
		snprintf(why, whysz, "sbx: unknown command '%.20s'", r->command);
		return CNI_E_INVALID_ENV;
	}
	if (!strcmp(r->command, "ADD") && (!r->alloc_id[0] || !r->netns[0])) {
		snprintf(why, whysz, "sbx: ADD needs the allocation and the network namespace");
		return CNI_E_INVALID_ENV;
	}
	return 0;
}
