/* hsess: the integration tests' HTTPS session (t/integration/lib.sh
 * `req`). One libcurl handle whose connection to nginx stays open between
 * requests: a `curl` process a request cost ~30-45 ms of CPU on a slow
 * 2-core machine (the process, libcurl's and OpenSSL's start, the CA file,
 * a TLS handshake), and a CI run made about two thousand of them.
 *
 * It does what lib.sh's `curl -sS --path-as-is --cacert CA --max-time T
 * -X METHOD -D HFILE -o OUT [--data-binary @BODY] [-H H]... URL` does,
 * through the same libcurl: the same request line, headers (curl's
 * User-Agent and Accept: curl adds them), body, and the same HFILE and
 * OUT. Only the connection differs: it is kept for the next request (as
 * any HTTP client keeps it), and libcurl opens a new one when nginx has
 * closed it.
 *
 * A request is one line on stdin, its fields separated by 0x1f:
 *   MARK METHOD URL CAFILE TIMEOUT HFILE OUT BODYFILE [HEADER...]
 * (BODYFILE empty: no body; an empty HEADER is left out, as curl leaves
 * out -H ""). The answer is one line on stdout:
 *   MARK RC MESSAGE
 * RC is libcurl's result (0: a response came; curl's exit code otherwise),
 * MESSAGE what curl would have said on stderr. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAXF 256

static size_t put(char *p, size_t size, size_t n, void *f)
{
	return fwrite(p, size, n, f);
}

static size_t get(char *p, size_t size, size_t n, void *f)
{
	size_t r = fread(p, size, n, f);

	return ferror((FILE *)f) ? CURL_READFUNC_ABORT : r;
}

/* one request; 0 or libcurl's code, the message in msg */
static int perform(CURL *c, char **f, int nf, char *msg, size_t msz)
{
	const char *method = f[1], *url = f[2], *ca = f[3], *hpath = f[5],
		   *opath = f[6], *bpath = f[7];
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hs = NULL, *t;
	FILE *hf = NULL, *of = NULL, *bf = NULL;
	struct stat st;
	long timeout = strtol(f[4], NULL, 10);
	int i, rc = CURLE_FAILED_INIT;

	curl_easy_reset(c); /* keeps the connection */
	hf = fopen(hpath, "w");
	of = fopen(opath, "w");
	if (!hf || !of) {
		snprintf(msg, msz, "cannot open %s: %s", hf ? opath : hpath, strerror(errno));
		rc = CURLE_WRITE_ERROR;
		goto out;
	}
	if (*bpath) {
		bf = fopen(bpath, "r");
		if (!bf || fstat(fileno(bf), &st) != 0) {
			snprintf(msg, msz, "cannot read %s: %s", bpath, strerror(errno));
			rc = CURLE_READ_ERROR;
			goto out;
		}
	}
	for (i = 8; i < nf; i++) {
		if (!*f[i]) /* an empty -H: nothing (curl sends nothing for it) */
			continue;
		t = curl_slist_append(hs, f[i]);
		if (!t) {
			snprintf(msg, msz, "out of memory");
			goto out;
		}
		hs = t;
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CAINFO, ca);
	curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout > 0 ? timeout : 60L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "curl/" LIBCURL_VERSION);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, put);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, hf);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, put);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, of);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
	if (bf) {
		/* --data-binary @FILE: a POST body of the file's bytes */
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, get);
		curl_easy_setopt(c, CURLOPT_READDATA, bf);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)st.st_size);
	}
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method); /* -X */
	rc = curl_easy_perform(c);
	if (rc != CURLE_OK)
		snprintf(msg, msz, "curl: (%d) %s", rc, *errbuf ? errbuf : curl_easy_strerror(rc));
out:
	curl_slist_free_all(hs);
	if (bf)
		fclose(bf);
	if (of && fclose(of) != 0 && rc == CURLE_OK) {
		snprintf(msg, msz, "writing %s: %s", opath, strerror(errno));
		rc = CURLE_WRITE_ERROR;
	}
	if (hf)
		fclose(hf);
	return rc;
}

int main(void)
{
	char *line = NULL, *f[MAXF], *p, msg[CURL_ERROR_SIZE + 64];
	size_t cap = 0;
	ssize_t len;
	CURL *c;
	int nf, rc;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0 || !(c = curl_easy_init())) {
		fprintf(stderr, "hsess: cannot start libcurl\n");
		return 1;
	}
	while ((len = getline(&line, &cap, stdin)) > 0) {
		if (line[len - 1] == '\n')
			line[--len] = '\0';
		nf = 0;
		for (p = line; nf < MAXF;) {
			f[nf++] = p;
			p = strchr(p, '\x1f');
			if (!p)
				break;
			*p++ = '\0';
		}
		msg[0] = '\0';
		if (nf < 8 || (p && nf == MAXF)) {
			snprintf(msg, sizeof(msg), "hsess: a request needs 8 fields and at most %d", MAXF);
			rc = CURLE_BAD_FUNCTION_ARGUMENT;
		} else {
			rc = perform(c, f, nf, msg, sizeof(msg));
		}
		for (p = msg; *p; p++) /* one line */
			if (*p == '\n' || *p == '\r')
				*p = ' ';
		printf("%s %d %s\n", f[0], rc, msg);
		fflush(stdout);
	}
	curl_easy_cleanup(c);
	curl_global_cleanup();
	free(line);
	return 0;
}
