/* The Docker Engine API calls of docker.h. Paths carry no API version: the
 * daemon then serves its own (the calls used exist since API 1.24). */
#include "config.h"
#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "docker.h"

#define DOCKER_MAX_ANSWER (256u * 1024) /* an inspect is a few kB */

struct dresp {
	char *body;
	size_t len;
	bool too_big;
};

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
	struct dresp *r = ud;
	size_t k = sz * n;
	char *b;

	if (r->len + k > DOCKER_MAX_ANSWER) {
		r->too_big = true;
		return 0;
	}
	b = realloc(r->body, r->len + k + 1);
	if (!b)
		return 0;
	memcpy(b + r->len, p, k);
	r->len += k;
	b[r->len] = 0;
	r->body = b;
	return k;
}

/* The daemon's "message" of an error answer, or its first bytes. */
static const char *message(const struct dresp *r, char *buf, size_t sz)
{
	json_t *j = r->body ? json_loads(r->body, 0, NULL) : NULL;
	const char *m = j ? json_string_value(json_object_get(j, "message")) : NULL;

	snprintf(buf, sz, "%.200s", m ? m : r->body ? r->body : "");
	json_decref(j);
	for (char *c = buf; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
	return buf;
}

static int call(const char *host, const char *method, const char *path, long *status, struct dresp *r,
		sbx_err *err)
{
	CURL *h;
	CURLcode rc;
	char url[512], ebuf[CURL_ERROR_SIZE] = "";

	*status = 0;
	if (!host || strncmp(host, "unix://", 7) || host[7] != '/')
		return sbx_err_set(err, 500, "sandbox_config", "the Docker host must be unix:///PATH (got '%s')",
				   host ? host : "");
	snprintf(url, sizeof(url), "http://docker%s", path);
	h = curl_easy_init();
	if (!h)
		return sbx_err_set(err, 500, "nomem", "curl_easy_init");
	curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, host + 7);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)DOCKER_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (!strcmp(method, "POST")) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
	}
	rc = curl_easy_perform(h);
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	curl_easy_cleanup(h);
	if (rc == CURLE_WRITE_ERROR && r->too_big)
		return sbx_err_set(err, 503, "docker", "Docker's answer to %s %s is larger than %u bytes", method, path,
				   DOCKER_MAX_ANSWER);
	if (rc != CURLE_OK)
		return sbx_err_set(err, 503, "docker", "Docker at %s is unavailable: %s", host,
				   ebuf[0] ? ebuf : curl_easy_strerror(rc));
	return 0;
}

static bool name_ok(const char *name)
{
	size_t n = strlen(name);

	if (!n || n > 128)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", name[i]))
			return false;
	return true;
}

int docker_pause(const char *host, const char *name, bool pause, sbx_err *err)
{
	struct dresp r = { 0 };
	char path[200], msg[256];
	long st;
	int ret = 0;

	if (!name_ok(name))
		return sbx_err_set(err, 400, "docker", "bad container name");
	snprintf(path, sizeof(path), "/containers/%s/%s", name, pause ? "pause" : "unpause");
	if (call(host, "POST", path, &st, &r, err) < 0)
		ret = -1;
	else if (st == 204 || st == 200)
		ret = 0;
	else if (st == 409 && strstr(message(&r, msg, sizeof(msg)), pause ? "already paused" : "not paused"))
		ret = 0; /* done before: a repeated request */
	else
		ret = sbx_err_set(err, st == 404 ? 404 : st == 409 ? 409 : 503, "docker", "docker %s %s: %ld %s",
				  pause ? "pause" : "unpause", name, st, message(&r, msg, sizeof(msg)));
	free(r.body);
	return ret;
}
