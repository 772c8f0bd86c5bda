/* libFuzzer target: method byte + raw request URI through sbx_route_match.
 * Besides crashes and UB it checks the router's promises: a file path starts
 * with '/', never has a '.' or '..' segment or an empty one, never holds a
 * NUL; ids are valid; pids in range; errors are 400/404/405 (405 with the
 * allowed methods); and the /v1 prefix never changes the outcome. */
#include "config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "router.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(c) do { if (!(c)) __builtin_trap(); } while (0)

static const char *const methods[] = { "GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "", NULL };

static int has_id(enum sbx_route r)
{
	return r >= SBX_R_SANDBOX && r <= SBX_R_VOLUME && r != SBX_R_SNAPSHOTS && r != SBX_R_VOLUMES;
}

static void check_match(int r, const char *uri, const struct sbx_route_match *m, const sbx_err *err)
{
	if (r < 0) {
		require(r == -1);
		require(err->http == 400 || err->http == 404 || err->http == 405 || err->http == 500);
		require(err->msg[0]);
		if (err->http == 405)
			require(m->allowed != 0 && !(m->allowed & m->method));
		return;
	}
	require(r == 0);
	require(m->route > SBX_R_NONE && m->route < SBX_R__COUNT);
	require(m->method & m->allowed);
	require(m->query != NULL);
	require(m->query[0] == 0 || (m->query > uri && m->query[-1] == '?'));
	if (has_id(m->route))
		require(sbx_id_valid(m->id));
	else
		require(m->id[0] == 0);
	if (m->route >= SBX_R_PROCESS && m->route <= SBX_R_PROCESS_SIGNAL)
		require(m->pid >= 1 && m->pid <= 2147483647L);
	if (m->route == SBX_R_FILE) {
		size_t n = strnlen(m->path, sizeof(m->path));
		require(n < sizeof(m->path));
		require(m->path[0] == '/');
		require(!strstr(m->path, "/../") && !strstr(m->path, "/./") && !strstr(m->path, "//"));
		require(!(n >= 3 && !strcmp(m->path + n - 3, "/..")));
		require(!(n >= 2 && !strcmp(m->path + n - 2, "/.")));
		require(n == 1 || m->path[n - 1] != '/');
	} else {
		require(m->path[0] == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sbx_route_match m, m2;
	sbx_err err = SBX_ERR_INIT, err2 = SBX_ERR_INIT;
	const char *method;
	char *uri;
	int r;

	if (size < 1)
		return 0;
	method = methods[data[0] % (sizeof(methods) / sizeof(methods[0]))];
	uri = malloc(size);
	if (!uri)
		return 0;
	memcpy(uri, data + 1, size - 1);
	uri[size - 1] = 0;

	r = sbx_route_match(method, uri, &m, &err);
	check_match(r, uri, &m, &err);

	/* "/v1/X" must behave exactly as "/X" (the prefix is stripped once only,
	 * so X itself must not start with /v1) */
	if (!strncmp(uri, "/v1/", 4) && strncmp(uri + 3, "/v1", 3) != 0) {
		int r2 = sbx_route_match(method, uri + 3, &m2, &err2);
		check_match(r2, uri + 3, &m2, &err2);
		require(r == r2);
		if (r == 0) {
			require(m.v1 == 1 && m2.v1 == 0);
			require(m.route == m2.route && m.pid == m2.pid);
			require(!strcmp(m.id, m2.id) && !strcmp(m.path, m2.path));
			require(!strcmp(m.query, m2.query));
		} else {
			require(err.http == err2.http);
		}
	}
	free(uri);
	return 0;
}
