/* Reading the Docker daemon's answers and /proc/PID/cgroup (docker_answer.h). */
#include "config.h"
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "docker_answer.h"

const char *docker_message_of(const char *body, char *buf, size_t sz)
{
	json_t *j = body ? json_loads(body, 0, NULL) : NULL;
	const char *m = j ? json_string_value(json_object_get(j, "message")) : NULL;

	snprintf(buf, sz, "%.200s", m ? m : body ? body : "");
	json_decref(j);
	for (char *c = buf; *c; c++)
		if (*c == '\n' || *c == '\r' || *c == '\t')
			*c = ' ';
	return buf;
}

int docker_layer_of(json_t *container, const char *name, char *upper, size_t usz, char *image_id, size_t isz,
		    sbx_err *err)
{
	json_t *gd = json_object_get(container, "GraphDriver");
	const char *drv = json_string_value(json_object_get(gd, "Name"));
	const char *up = json_string_value(json_object_get(json_object_get(gd, "Data"), "UpperDir"));
	const char *iid = json_string_value(json_object_get(container, "Image"));

	if (!drv || strcmp(drv, "overlay2") || !up || up[0] != '/' || strstr(up, "/../") || strchr(up, '\n'))
		return sbx_err_set(err, 503, "docker",
				   "container %s: its storage is %.40s, not overlay2 with an upper directory", name,
				   drv && strspn(drv, "abcdefghijklmnopqrstuvwxyz0123456789-_.") == strlen(drv)
					   ? drv
					   : "unknown");
	if ((size_t)snprintf(upper, usz, "%s", up) >= usz)
		return sbx_err_set(err, 503, "docker", "container %s: its upper directory's path is too long", name);
	if (!iid || strncmp(iid, "sha256:", 7) || strlen(iid) != 71 || strspn(iid + 7, "0123456789abcdef") != 64 ||
	    isz <= 71)
		return sbx_err_set(err, 503, "docker", "container %s: no image id", name);
	memcpy(image_id, iid, 72);
	return 0;
}

int docker_repo_digest_of(json_t *image, const char *registry, const char *name, char *base, size_t bsz,
			  sbx_err *err)
{
	size_t i, rl = strlen(registry);
	json_t *v;

	json_array_foreach(json_object_get(image, "RepoDigests"), i, v) {
		const char *d = json_string_value(v), *at;
		if (!d || strncmp(d, registry, rl) || d[rl] != '/' || strncmp(d + rl + 1, "sbx/", 4) ||
		    !(at = strchr(d + rl, '@')) || strncmp(at, "@sha256:", 8) || strlen(at + 8) != 64 ||
		    strspn(at + 8, "0123456789abcdef") != 64 ||
		    strspn(d + rl + 1, "abcdefghijklmnopqrstuvwxyz0123456789._-/") != (size_t)(at - d - rl - 1) ||
		    strstr(d + rl + 1, ".."))
			continue;
		if ((size_t)snprintf(base, bsz, "%s", d + rl + 1) < bsz)
			return 0;
	}
	return sbx_err_set(err, 503, "docker", "container %s: its image came from no sbx repository of %s", name,
			   registry);
}

int docker_pid_of(json_t *container, const char *name, long *pid, sbx_err *err)
{
	json_t *st = json_object_get(container, "State");
	json_t *p = json_object_get(st, "Pid");

	*pid = -1;
	if (!json_is_object(st) || !json_is_integer(p))
		return sbx_err_set(err, 503, "docker", "container %s: its inspect has no State.Pid", name);
	if (!json_is_true(json_object_get(st, "Running")))
		return sbx_err_set(err, 409, "docker", "container %s is not running", name);
	if (json_integer_value(p) <= 1 || json_integer_value(p) > 0x3fffffff)
		return sbx_err_set(err, 503, "docker", "container %s: no process (State.Pid %lld)", name,
				   (long long)json_integer_value(p));
	*pid = (long)json_integer_value(p);
	return 0;
}

/* rel := PATH (of "/PATH") when it is a plain, non-root cgroup path. */
static int take(const char *path, size_t n, char *rel, size_t sz)
{
	if (n < 2 || path[0] != '/' || n - 1 >= sz ||
	    strspn(path, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@/-") != n)
		return -1;
	memcpy(rel, path + 1, n - 1);
	rel[n - 1] = 0;
	/* no "..", no empty part */
	for (const char *s = rel; *s;) {
		size_t k = strcspn(s, "/");
		if (!k || (k == 2 && !strncmp(s, "..", 2)) || (k == 1 && s[0] == '.'))
			return -1;
		s += k;
		if (*s == '/' && !*++s)
			return -1;
	}
	return 0;
}

int docker_cgroup_of(const char *text, char *rel, size_t sz)
{
	const char *v2 = NULL;
	size_t v2n = 0;

	for (const char *l = text; l && *l;) {
		const char *eol = strchr(l, '\n'), *c1 = strchr(l, ':'), *c2;
		size_t len = eol ? (size_t)(eol - l) : strlen(l);

		if (c1 && c1 < l + len && (c2 = memchr(c1 + 1, ':', (size_t)(l + len - c1 - 1)))) {
			size_t cl = (size_t)(c2 - c1 - 1);
			const char *path = c2 + 1;
			size_t pn = (size_t)(l + len - path);
			bool mem = false;

			for (const char *k = c1 + 1; k < c2;) {
				size_t kl = strcspn(k, ",:");
				if (kl == 6 && !strncmp(k, "memory", 6))
					mem = true;
				k += kl + 1;
			}
			if (mem)
				return take(path, pn, rel, sz);
			if (!cl && c1 - l == 1 && l[0] == '0') {
				v2 = path;
				v2n = pn;
			}
		}
		l = eol ? eol + 1 : NULL;
	}
	return v2 ? take(v2, v2n, rel, sz) : -1;
}
