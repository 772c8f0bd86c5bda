/* The Docker Engine API calls of docker.h. Paths carry no API version: the
 * daemon then serves its own (the calls used exist since API 1.24). */
#include "config.h"
#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "curlbody.h"
#include "docker.h"
#include "docker_answer.h"

#define DOCKER_MAX_ANSWER (256u * 1024) /* an inspect is a few kB */

static const char *message(const struct sbx_curl_body *r, char *buf, size_t sz)
{
	return docker_message_of(r->data, buf, sz);
}

/* An answer with status st that is not the one asked for: 404 and 409 as
 * Docker said (a missing container, one in the wrong state), anything else
 * 503; with Docker's message. */
static int http_fail(sbx_err *err, long st, const struct sbx_curl_body *r, const char *what)
{
	char msg[256];

	return sbx_err_set(err, st == 404 || st == 409 ? (int)st : 503, "docker", "docker %s: %ld %s", what, st,
			   message(r, msg, sizeof(msg)));
}

static int call(const char *host, const char *method, const char *path, const char *body, long timeout_ms,
		long *status, struct sbx_curl_body *r, sbx_err *err)
{
	CURL *h;
	CURLcode rc;
	char url[512], ebuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = NULL;

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
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sbx_curl_body_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (!strcmp(method, "POST")) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, body ? (long)strlen(body) : 0L);
		if (body) {
			hdrs = curl_slist_append(NULL, "Content-Type: application/json");
			curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
		}
	}
	rc = curl_easy_perform(h);
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
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
	struct sbx_curl_body r = { .max = DOCKER_MAX_ANSWER };
	char path[200], msg[256], what[160];
	long st;
	int ret = 0;

	if (!name_ok(name))
		return sbx_err_set(err, 400, "docker", "bad container name");
	snprintf(path, sizeof(path), "/containers/%s/%s", name, pause ? "pause" : "unpause");
	snprintf(what, sizeof(what), "%s %s", pause ? "pause" : "unpause", name);
	if (call(host, "POST", path, NULL, DOCKER_TIMEOUT_MS, &st, &r, err) < 0)
		ret = -1;
	else if (st == 204 || st == 200)
		ret = 0;
	else if (st == 409 && strstr(message(&r, msg, sizeof(msg)), pause ? "already paused" : "not paused"))
		ret = 0; /* done before: a repeated request */
	else
		ret = http_fail(err, st, &r, what);
	free(r.data);
	return ret;
}

/* METHOD PATH [BODY] answered with a JSON object and a status in ok1/ok2. */
static int call_json(const char *host, const char *method, const char *path, const char *body, long timeout_ms,
		     long ok1, long ok2, const char *what, json_t **out, sbx_err *err)
{
	struct sbx_curl_body r = { .max = DOCKER_MAX_ANSWER };
	long st;
	int ret = 0;

	*out = NULL;
	if (call(host, method, path, body, timeout_ms, &st, &r, err) < 0)
		ret = -1;
	else if (st != ok1 && st != ok2)
		ret = http_fail(err, st, &r, what);
	else if (!(*out = json_loads(r.data ? r.data : "", 0, NULL)) || !json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		ret = sbx_err_set(err, 503, "docker", "docker %s: the answer is not a JSON object", what);
	}
	free(r.data);
	return ret;
}

int docker_exec(const char *host, const char *name, const char *const *argv, int timeout_ms, sbx_err *err)
{
	char path[200], what[200];
	json_t *cmd = json_array(), *j = NULL;
	char *body;
	const char *eid;
	struct timespec ts = { 0, 20 * 1000000L };
	int ret = -1;
	long waited = 0;

	if (!name_ok(name)) {
		json_decref(cmd);
		return sbx_err_set(err, 400, "docker", "bad container name");
	}
	for (size_t i = 0; argv[i]; i++)
		json_array_append_new(cmd, json_string(argv[i]));
	j = json_pack("{s:o, s:b, s:b}", "Cmd", cmd, "AttachStdout", 0, "AttachStderr", 0); /* owns cmd */
	body = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	j = NULL;
	if (!body)
		return sbx_err_set(err, 500, "nomem", "docker exec body");
	snprintf(path, sizeof(path), "/containers/%s/exec", name);
	snprintf(what, sizeof(what), "exec %s in %s", argv[0], name);
	if (call_json(host, "POST", path, body, DOCKER_TIMEOUT_MS, 201, 200, what, &j, err) < 0)
		goto out;
	if (!(eid = json_string_value(json_object_get(j, "Id"))) || !name_ok(eid)) {
		sbx_err_set(err, 503, "docker", "docker %s: no exec id in the answer", what);
		goto out;
	}
	snprintf(path, sizeof(path), "/exec/%s/start", eid);
	{
		struct sbx_curl_body r = { .max = DOCKER_MAX_ANSWER };
		long st;
		int rc = call(host, "POST", path, "{\"Detach\":true,\"Tty\":false}", DOCKER_TIMEOUT_MS, &st, &r, err);
		if (rc == 0 && st != 200 && st != 204) {
			char msg[256];
			rc = sbx_err_set(err, 503, "docker", "docker %s: start: %ld %s", what, st,
					 message(&r, msg, sizeof(msg)));
		}
		free(r.data);
		if (rc < 0)
			goto out;
	}
	snprintf(path, sizeof(path), "/exec/%s/json", eid);
	for (;;) {
		json_t *e = NULL;
		if (call_json(host, "GET", path, NULL, DOCKER_TIMEOUT_MS, 200, 200, what, &e, err) < 0)
			goto out;
		if (!json_is_true(json_object_get(e, "Running"))) {
			json_int_t code = json_integer_value(json_object_get(e, "ExitCode"));
			json_decref(e);
			ret = code == 0 ? 0 : sbx_err_set(err, 500, "docker", "docker %s: exit %lld", what, (long long)code);
			goto out;
		}
		json_decref(e);
		if (waited >= timeout_ms) {
			sbx_err_set(err, 504, "docker", "docker %s: still running after %d ms", what, timeout_ms);
			goto out;
		}
		nanosleep(&ts, NULL);
		waited += 20;
	}
out:
	json_decref(j);
	free(body);
	return ret;
}

/* GET /containers/NAME/json within timeout_ms. */
static int inspect(const char *host, const char *name, long timeout_ms, json_t **out, sbx_err *err)
{
	char path[300], what[160];

	*out = NULL;
	if (!name_ok(name))
		return sbx_err_set(err, 400, "docker", "bad container name");
	snprintf(path, sizeof(path), "/containers/%s/json", name);
	snprintf(what, sizeof(what), "inspect %s", name);
	return call_json(host, "GET", path, NULL, timeout_ms, 200, 200, what, out, err);
}

int docker_layer(const char *host, const char *name, const char *registry, char *base, size_t bsz, char *upper,
		 size_t usz, sbx_err *err)
{
	char path[300], what[160], iid[80];
	json_t *c = NULL, *im = NULL;
	int ret = -1;

	if (inspect(host, name, DOCKER_TIMEOUT_MS, &c, err) < 0)
		return -1;
	if (docker_layer_of(c, name, upper, usz, iid, sizeof(iid), err) < 0)
		goto out;
	snprintf(path, sizeof(path), "/images/%s/json", iid);
	snprintf(what, sizeof(what), "image inspect of %s's image", name);
	if (call_json(host, "GET", path, NULL, DOCKER_TIMEOUT_MS, 200, 200, what, &im, err) < 0)
		goto out;
	ret = docker_repo_digest_of(im, registry, name, base, bsz, err);
out:
	json_decref(c);
	json_decref(im);
	return ret;
}

int docker_pid(const char *host, const char *name, int timeout_ms, long *pid, sbx_err *err)
{
	json_t *c = NULL;
	int ret;

	*pid = -1;
	if (inspect(host, name, timeout_ms, &c, err) < 0)
		return -1;
	ret = docker_pid_of(c, name, pid, err);
	json_decref(c);
	return ret;
}
