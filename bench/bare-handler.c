/* bench/bare-handler.c — the yardstick for `GET /sandboxes/{id}` (issue 10):
 * the least a FastCGI program behind nginx can do for that request with the
 * same database work as sbx-api: hash the key (BLAKE2b keyed with the
 * install's auth_secret), look the key up and read the sandbox's JSON, both
 * as statements prepared once per connection, and answer with the row.
 * No routing, limits, logging or JSON handling: what is left of sbx-api's
 * time above this is its own.
 *
 * Built and started by bench/api-get (never installed):
 *   bare-handler SOCKET CHILDREN CONNINFO AUTH_SECRET_HEX */
#include <fcgiapp.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static unsigned char secret[32];
static volatile sig_atomic_t stop;
static pid_t *pids;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void fail(const char *what, PGconn *c)
{
	fprintf(stderr, "bare-handler: %s: %s\n", what, c ? PQerrorMessage(c) : "");
	exit(1);
}

static void answer(FCGX_Request *rq, int status, const char *body)
{
	FCGX_FPrintF(rq->out, "Status: %d\r\nCache-Control: no-store\r\nContent-Type: application/json\r\n\r\n%s",
		     status, body);
}

static void serve(FCGX_Request *rq, PGconn *db)
{
	const char *uri = FCGX_GetParam("REQUEST_URI", rq->envp);
	const char *a = FCGX_GetParam("HTTP_AUTHORIZATION", rq->envp);
	unsigned char h[32];
	char hex[2 + 64 + 1] = "\\x", org[32];
	const char *p[2];
	const char *id;
	PGresult *r;

	if (!uri || !a || strncmp(a, "Bearer ", 7) != 0 || !(id = strrchr(uri, '/'))) {
		answer(rq, 401, "{\"message\":\"Invalid API key\"}");
		return;
	}
	a += 7;
	id++;
	crypto_generichash(h, sizeof(h), (const unsigned char *)a, strlen(a), secret, sizeof(secret));
	sodium_bin2hex(hex + 2, 65, h, sizeof(h));
	p[0] = hex;
	r = PQexecPrepared(db, "auth", 1, p, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		PQclear(r);
		answer(rq, 401, "{\"message\":\"Invalid API key\"}");
		return;
	}
	snprintf(org, sizeof(org), "%s", PQgetvalue(r, 0, 1));
	PQclear(r);
	p[0] = id;
	p[1] = org;
	r = PQexecPrepared(db, "get", 2, p, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		PQclear(r);
		answer(rq, 404, "{\"message\":\"Sandbox not found\"}");
		return;
	}
	FCGX_FPrintF(rq->out,
		     "Status: 200\r\nCache-Control: no-store\r\nContent-Type: application/json\r\n\r\n"
		     "{\"message\":\"Sandbox retrieved\",\"data\":%s}",
		     PQgetvalue(r, 0, 0));
	PQclear(r);
}

static void child(int fd, const char *conninfo)
{
	PGconn *db = PQconnectdb(conninfo);
	FCGX_Request rq;
	PGresult *r;

	if (PQstatus(db) != CONNECTION_OK)
		fail("connect", db);
	/* the same statements sbx-api runs for this request */
	r = PQprepare(db, "auth",
		      "SELECT k.id, k.org_id, k.hash, k.is_admin, o.max_sandboxes, o.max_memory_mb, "
		      "k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute', "
		      "coalesce(o.max_concurrent_requests, 0), coalesce(o.max_concurrent_streams, 0) "
		      "FROM api_keys k JOIN orgs o ON o.id = k.org_id "
		      "WHERE k.hash = $1::bytea AND k.revoked_at IS NULL",
		      1, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		fail("prepare auth", db);
	PQclear(r);
	r = PQprepare(db, "get", "SELECT sbx_sandbox_json(s) FROM sandboxes s WHERE s.id = $1 AND s.org_id = $2", 2,
		      NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		fail("prepare get", db);
	PQclear(r);
	FCGX_Init();
	FCGX_InitRequest(&rq, fd, 0);
	while (FCGX_Accept_r(&rq) >= 0) {
		serve(&rq, db);
		FCGX_Finish_r(&rq);
	}
	exit(0);
}

int main(int argc, char **argv)
{
	size_t len = 0;
	int fd, n;

	if (argc != 5 || (n = atoi(argv[2])) < 1 || sodium_init() < 0 ||
	    sodium_hex2bin(secret, sizeof(secret), argv[4], strlen(argv[4]), NULL, &len, NULL) != 0 ||
	    len != sizeof(secret)) {
		fprintf(stderr, "usage: bare-handler SOCKET CHILDREN CONNINFO AUTH_SECRET_HEX\n");
		return 2;
	}
	unlink(argv[1]);
	umask(0);
	fd = FCGX_OpenSocket(argv[1], 1024);
	if (fd < 0) {
		fprintf(stderr, "bare-handler: cannot listen on %s\n", argv[1]);
		return 1;
	}
	pids = calloc((size_t)n, sizeof(*pids));
	signal(SIGTERM, on_term);
	for (int i = 0; i < n; i++)
		if ((pids[i] = fork()) == 0) {
			signal(SIGTERM, SIG_DFL);
			child(fd, argv[3]);
		}
	/* the bench ends us with SIGTERM; the children go with us */
	while (!stop)
		pause();
	for (int i = 0; i < n; i++)
		kill(pids[i], SIGTERM);
	while (wait(NULL) > 0)
		;
	unlink(argv[1]);
	return 0;
}
