/*
 * jget: `jq -r FILTER` for the integration tests' `j` (t/integration/lib.sh),
 * without jq's start for the filters they use most.
 *
 *   jget [-r]... FILTER < JSON
 *
 * When FILTER is a plain path (.key, [N], chained, optionally followed by
 * " // empty" or " | strings") and the input is one JSON value whose path
 * gives a string, an integer below 2^53, true, false or null, jget prints
 * what `jq -r FILTER` prints. Anything else (another filter or option,
 * input that is not one JSON value, a path through the wrong type, a number
 * with a fraction, an object or array to print) is handed to jq itself, with
 * the same arguments and the same input: the answer is always jq's.
 * Why: jq 1.6 compiles its builtins at every start, ~30 ms of CPU on a slow
 * machine, and a CI run asks it ~2,500 times (doc/testing.md "Where the CPU
 * goes").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define JGET_MAX_INPUT (64u << 20)

/* Hands over to `jq -r ARGS...` with the input read so far as its stdin. */
static void
to_jq(char **argv, const char *buf, size_t len)
{
	int fd = memfd_create("jget", 0);
	size_t off = 0;

	if (fd < 0) {
		perror("jget: memfd_create");
		exit(2);
	}
	while (off < len) {
		ssize_t n = write(fd, buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			perror("jget: write");
			exit(2);
		}
		off += (size_t)n;
	}
	if (lseek(fd, 0, SEEK_SET) != 0 || dup2(fd, 0) < 0) {
		perror("jget: stdin");
		exit(2);
	}
	close(fd);
	argv[0] = "jq";
	execvp("jq", argv);
	perror("jget: jq");
	exit(2);
}

/* Reads all of stdin into *buf (NUL-terminated); 0 or -1. */
static int
read_all(char **buf, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *b = malloc(cap + 1);

	if (!b)
		return -1;
	for (;;) {
		ssize_t r;
		if (n == cap) {
			char *nb;
			if (cap >= JGET_MAX_INPUT)
				break;
			cap *= 2;
			nb = realloc(b, cap + 1);
			if (!nb) {
				free(b);
				return -1;
			}
			b = nb;
		}
		r = read(0, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(b);
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
}

enum { SUFFIX_NONE, SUFFIX_ALT_EMPTY, SUFFIX_STRINGS };

/*
 * Follows the plain path p (.key and [N] steps) from v. Returns the value
 * (json_null() for a missing key or index, as jq), or NULL when jq would
 * fail or the path is not plain. *suffix says whether " // empty" (null and
 * false print nothing) or " | strings" (only a string prints) ends it.
 */
static json_t *
follow(json_t *v, const char *p, int *suffix)
{
	static const char *const suffixes[] = { [SUFFIX_ALT_EMPTY] = " // empty",
						[SUFFIX_STRINGS] = " | strings" };
	size_t plen = strlen(p);
	const char *end = p + plen;
	char key[256];

	*suffix = SUFFIX_NONE;
	for (int k = SUFFIX_ALT_EMPTY; k <= SUFFIX_STRINGS; k++) {
		size_t slen = strlen(suffixes[k]);

		if (plen > slen && strcmp(end - slen, suffixes[k]) == 0) {
			*suffix = k;
			end -= slen;
			break;
		}
	}
	if (p == end)
		return NULL;
	while (p < end) {
		if (*p == '.') {
			size_t k = 0;
			p++;
			if (p == end || !(*p == '_' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')))
				return NULL;
			while (p < end && (*p == '_' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
					   (*p >= '0' && *p <= '9'))) {
				if (k + 1 >= sizeof(key))
					return NULL;
				key[k++] = *p++;
			}
			key[k] = '\0';
			if (json_is_null(v))
				continue;
			if (!json_is_object(v))
				return NULL;
			v = json_object_get(v, key);
			if (!v)
				v = json_null();
		} else if (*p == '[') {
			size_t i = 0, digits = 0;
			p++;
			while (p < end && *p >= '0' && *p <= '9' && digits < 9) {
				i = i * 10 + (size_t)(*p++ - '0');
				digits++;
			}
			if (!digits || p == end || *p != ']')
				return NULL;
			p++;
			if (json_is_null(v))
				continue;
			if (!json_is_array(v))
				return NULL;
			v = json_array_get(v, i);
			if (!v)
				v = json_null();
		} else {
			return NULL;
		}
	}
	return v;
}

int
main(int argc, char **argv)
{
	char *buf;
	size_t len;
	int i = 1, suffix;
	json_t *root, *v;
	json_error_t err;

	while (i < argc && strcmp(argv[i], "-r") == 0)
		i++;
	if (read_all(&buf, &len) < 0) {
		perror("jget: stdin");
		return 2;
	}
	if (i != argc - 1)
		to_jq(argv, buf, len);
	root = json_loadb(buf, len, JSON_DECODE_ANY, &err);
	if (!root)
		to_jq(argv, buf, len);
	v = follow(root, argv[i], &suffix);
	if (!v)
		to_jq(argv, buf, len);
	if ((suffix == SUFFIX_ALT_EMPTY && (json_is_null(v) || json_is_false(v))) ||
	    (suffix == SUFFIX_STRINGS && !json_is_string(v))) {
		json_decref(root);
		free(buf);
		return 0;
	}
	switch (json_typeof(v)) {
	case JSON_STRING:
		fwrite(json_string_value(v), 1, json_string_length(v), stdout);
		putchar('\n');
		break;
	case JSON_INTEGER: {
		json_int_t n = json_integer_value(v);
		/* jq prints numbers as doubles: exact below 2^53; and a -0
		 * (jansson: the integer 0) as -0 */
		if (n >= (1LL << 53) || n <= -(1LL << 53) || (n == 0 && strstr(buf, "-0")))
			to_jq(argv, buf, len);
		printf("%" JSON_INTEGER_FORMAT "\n", n);
		break;
	}
	case JSON_TRUE:
		puts("true");
		break;
	case JSON_FALSE:
		puts("false");
		break;
	case JSON_NULL:
		puts("null");
		break;
	default:
		to_jq(argv, buf, len);
	}
	json_decref(root);
	free(buf);
	return fflush(stdout) == 0 ? 0 : 1;
}
