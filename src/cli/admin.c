/* sbx-admin: the operator's tool. Migrates the database, manages
 * organisations, their limits and their API keys. Tokens are printed once,
 * on stdout alone, and stored only as a keyed hash. */
#include "config.h"
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "auth.h"
#include "cleanup.h"
#include "db.h"
#include "id.h"
#include "log.h"
#include "settings.h"
#include "usage.h"

#ifndef SBX_SRCDIR
#define SBX_SRCDIR "."
#endif

static sbx_config *cfg;
static sbx_db db;
static sbx_auth auth;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sbx-admin [-c CONF] COMMAND ...\n"
		"  migrate [--sql-dir DIR]          apply sql/*.sql not yet applied\n"
		"  org create NAME                  prints the new organisation id\n"
		"  org list\n"
		"  org limits ORG [--max-sandboxes N] [--max-memory-mb N] [--max-volume-gb N]\n"
		"                 [--max-volumes N] [--monthly-spend-limit-cents N|none]\n"
		"                 [--max-concurrent-requests N|default] [--max-concurrent-streams N|default]\n"
		"                 [--key-rate N|default] [--key-burst N|default]   (requests/s per key; 0: none)\n"
		"                 [--max-sandbox-execs N|default]\n"
		"  key issue ORG [--name NAME] [--admin]   prints the token (once) on stdout\n"
		"  key list ORG\n"
		"  key revoke KEYID\n"
		"  key rotate KEYID                 issues a replacement, revokes KEYID\n"
		"  usage ORG [--from TIME] [--to TIME]   usage and cost as JSON (default: this month)\n"
		"ORG is an organisation id or name.\n");
}

/* A command line we do not understand: the usage on stderr, exit status 2. */
static int bad_usage(void)
{
	usage(stderr);
	return 2;
}

static void die_err(const sbx_err *e)
{
	fprintf(stderr, "sbx-admin: %s\n", e->msg);
	exit(1);
}

static void need_db(void)
{
	sbx_err err = SBX_ERR_INIT;

	if (sbx_db_open(&db, sbx_cfg_str(cfg, "db_url"), &err) < 0)
		die_err(&err);
}

static void need_auth(void)
{
	sbx_err err = SBX_ERR_INIT;

	if (sbx_auth_init(&auth, sbx_cfg_str(cfg, "auth_secret"), &err) < 0)
		die_err(&err);
}

/* ---- migrate ---- */

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *slurp(const char *path)
{
	cleanup_fclose FILE *f = fopen(path, "re");
	char *buf;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0)
		return NULL;
	buf = malloc((size_t)n + 1);
	if (!buf)
		return NULL;
	if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		return NULL;
	}
	buf[n] = 0;
	return buf;
}

static int exec_simple(const char *sql, sbx_err *err)
{
	PGresult *r = PQexec(db.conn, sql);
	ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		sbx_err_set(err, 0, "db", "%s", r ? PQresultErrorMessage(r) : PQerrorMessage(db.conn));
		err->msg[strcspn(err->msg, "\n")] = 0;
		if (r)
			PQclear(r);
		return -1;
	}
	PQclear(r);
	return 0;
}

static const char *find_sql_dir(const char *given)
{
	static const char *cands[3];
	const char *env = getenv("SBX_SQL_DIR");

	if (given)
		return given;
	cands[0] = env;
	cands[1] = SBX_DATADIR "/sql";
	cands[2] = SBX_SRCDIR "/sql";
	for (int i = 0; i < 3; i++) {
		DIR *d;
		if (!cands[i])
			continue;
		d = opendir(cands[i]);
		if (d) {
			closedir(d);
			return cands[i];
		}
	}
	return NULL;
}

static int cmd_migrate(int argc, char **argv)
{
	const char *dir_path = NULL;
	sbx_err err = SBX_ERR_INIT;
	char *names[256];
	int n = 0, applied = 0;
	DIR *d;
	struct dirent *de;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--sql-dir") && i + 1 < argc)
			dir_path = argv[++i];
		else
			return bad_usage();
	}
	dir_path = find_sql_dir(dir_path);
	if (!dir_path) {
		fprintf(stderr, "sbx-admin: no sql directory found (use --sql-dir)\n");
		return 1;
	}
	need_db();
	d = opendir(dir_path);
	if (!d) {
		fprintf(stderr, "sbx-admin: %s: %s\n", dir_path, strerror(errno));
		return 1;
	}
	while ((de = readdir(d)) && n < 256) {
		size_t l = strlen(de->d_name);
		if (l > 8 && de->d_name[0] >= '0' && de->d_name[0] <= '9' && !strcmp(de->d_name + l - 4, ".sql"))
			names[n++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), name_cmp);
	if (exec_simple("CREATE TABLE IF NOT EXISTS schema_migrations ("
			"version integer PRIMARY KEY, name text NOT NULL, "
			"applied_at timestamptz NOT NULL DEFAULT now())",
			&err) < 0)
		die_err(&err);
	for (int i = 0; i < n; i++) {
		cleanup_free char *path = NULL, *sql = NULL;
		cleanup_pgres PGresult *r = NULL;
		char ver[16];
		int v = atoi(names[i]);

		snprintf(ver, sizeof(ver), "%d", v);
		if (exec_simple("BEGIN", &err) < 0 ||
		    /* one migrator at a time, across machines */
		    exec_simple("SELECT pg_advisory_xact_lock(7385001)", &err) < 0)
			die_err(&err);
		if (sbx_db_query(&db, &r, &err, "SELECT 1 FROM schema_migrations WHERE version = $1", 1, ver) < 0)
			die_err(&err);
		if (PQntuples(r) > 0) {
			exec_simple("ROLLBACK", &err);
			continue;
		}
		if (asprintf(&path, "%s/%s", dir_path, names[i]) < 0 || !(sql = slurp(path))) {
			fprintf(stderr, "sbx-admin: cannot read %s/%s\n", dir_path, names[i]);
			return 1;
		}
		if (exec_simple(sql, &err) < 0) {
			exec_simple("ROLLBACK", &(sbx_err){0});
			fprintf(stderr, "sbx-admin: migration %s failed: %s\n", names[i], err.msg);
			return 1;
		}
		if (sbx_db_query(&db, NULL, &err, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", 2,
				 ver, names[i]) < 0 ||
		    exec_simple("COMMIT", &err) < 0)
			die_err(&err);
		printf("applied %s\n", names[i]);
		applied++;
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	printf("migrations: %d applied, %d already there\n", applied, n - applied);
	return 0;
}

/* ---- organisations ---- */

/* Resolves ORG (id or name) to its id. */
static void org_id_of(const char *org, char out[SBX_ID_LEN + 1])
{
	cleanup_pgres PGresult *r = NULL;
	sbx_err err = SBX_ERR_INIT;

	if (sbx_db_query(&db, &r, &err, "SELECT id FROM orgs WHERE id = $1 OR name = $1", 1, org) < 0)
		die_err(&err);
	if (PQntuples(r) != 1) {
		fprintf(stderr, "sbx-admin: no organisation '%s'\n", org);
		exit(1);
	}
	snprintf(out, SBX_ID_LEN + 1, "%s", PQgetvalue(r, 0, 0));
}

static int cmd_org(int argc, char **argv)
{
	sbx_err err = SBX_ERR_INIT;

	if (argc < 2)
		return bad_usage();
	need_db();
	if (!strcmp(argv[1], "create") && argc == 3) {
		char id[SBX_ID_LEN + 1];
		sbx_id_new(id);
		if (sbx_db_query(&db, NULL, &err, "INSERT INTO orgs (id, name) VALUES ($1, $2)", 2, id, argv[2]) < 0) {
			if (sbx_db_is_unique_violation(&err))
				fprintf(stderr, "sbx-admin: organisation '%s' exists already\n", argv[2]);
			else if (!strcmp(err.code, "db:23514"))
				fprintf(stderr, "sbx-admin: organisation names are 1-63 of a-z, 0-9 and '-'\n");
			else
				fprintf(stderr, "sbx-admin: %s\n", err.msg);
			return 1;
		}
		printf("%s\n", id);
		return 0;
	}
	if (!strcmp(argv[1], "list") && argc == 2) {
		cleanup_pgres PGresult *r = NULL;
		if (sbx_db_query(&db, &r, &err,
				 "SELECT id, name, max_sandboxes, max_memory_mb, max_volume_gb, max_volumes, "
				 "coalesce(monthly_spend_limit_cents::text, 'none'), "
				 "coalesce(max_concurrent_requests::text, 'default'), "
				 "coalesce(max_concurrent_streams::text, 'default'), "
				 "coalesce(key_rate_per_s::text, 'default'), coalesce(key_burst::text, 'default'), "
				 "coalesce(max_sandbox_execs::text, 'default'), created_at "
				 "FROM orgs ORDER BY created_at",
				 0) < 0)
			die_err(&err);
		printf("%-24s  %-20s  %s\n", "ID", "NAME", "LIMITS");
		for (int i = 0; i < PQntuples(r); i++)
			printf("%-24s  %-20s  sandboxes=%s memory_mb=%s volume_gb=%s volumes=%s spend_cents=%s "
			       "concurrent_requests=%s concurrent_streams=%s key_rate=%s key_burst=%s "
			       "sandbox_execs=%s\n",
			       PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2), PQgetvalue(r, i, 3),
			       PQgetvalue(r, i, 4), PQgetvalue(r, i, 5), PQgetvalue(r, i, 6), PQgetvalue(r, i, 7),
			       PQgetvalue(r, i, 8), PQgetvalue(r, i, 9), PQgetvalue(r, i, 10),
			       PQgetvalue(r, i, 11));
		return 0;
	}
	if (!strcmp(argv[1], "limits") && argc >= 3) {
		/* unset: the word that stores NULL ("no limit", or "the API's setting") */
		static const struct { const char *opt, *col, *unset; } lim[] = {
			{ "--max-sandboxes", "max_sandboxes", NULL }, { "--max-memory-mb", "max_memory_mb", NULL },
			{ "--max-volume-gb", "max_volume_gb", NULL }, { "--max-volumes", "max_volumes", NULL },
			{ "--monthly-spend-limit-cents", "monthly_spend_limit_cents", "none" },
			{ "--max-concurrent-requests", "max_concurrent_requests", "default" },
			{ "--max-concurrent-streams", "max_concurrent_streams", "default" },
			{ "--key-rate", "key_rate_per_s", "default" }, { "--key-burst", "key_burst", "default" },
			{ "--max-sandbox-execs", "max_sandbox_execs", "default" },
		};
		char id[SBX_ID_LEN + 1];
		org_id_of(argv[2], id);
		for (int i = 3; i < argc; i += 2) {
			size_t k;
			char sql[160];
			const char *val;
			for (k = 0; k < SBX_ARRAY_LEN(lim); k++)
				if (!strcmp(argv[i], lim[k].opt))
					break;
			if (k == SBX_ARRAY_LEN(lim) || i + 1 >= argc)
				return bad_usage();
			val = argv[i + 1];
			if (lim[k].unset && !strcmp(val, lim[k].unset))
				val = NULL;
			else if (strspn(val, "0123456789") != strlen(val) || !*val || strlen(val) > 12) {
				fprintf(stderr, "sbx-admin: %s takes a whole number\n", argv[i]);
				return 2;
			}
			/* column names come from the table above, never from input */
			snprintf(sql, sizeof(sql), "UPDATE orgs SET %s = $2::bigint WHERE id = $1", lim[k].col);
			if (sbx_db_query(&db, NULL, &err, sql, 2, id, val) < 0) {
				if (!strcmp(err.code, "db:23514"))
					fprintf(stderr, "sbx-admin: %s: %s is out of range\n", argv[i], val);
				else
					fprintf(stderr, "sbx-admin: %s: %s\n", argv[i], err.msg);
				return 1;
			}
		}
		return 0;
	}
	return bad_usage();
}

/* ---- keys ---- */

static int issue_key(const char *org_id, const char *name, int admin, const char *rotated_from)
{
	char token[SBX_KEY_TOKEN_LEN + 1], id[SBX_ID_LEN + 1], prefix[SBX_KEY_SHOWN_PREFIX_LEN + 1];
	char hash_hex[2 * SBX_KEY_HASH_LEN + 3];
	unsigned char hash[SBX_KEY_HASH_LEN];
	sbx_err err = SBX_ERR_INIT;

	sbx_auth_new_token(token);
	sbx_auth_hash(&auth, token, hash);
	hash_hex[0] = '\\';
	hash_hex[1] = 'x';
	sbx_hex(hash, sizeof(hash), hash_hex + 2);
	memcpy(prefix, token, SBX_KEY_SHOWN_PREFIX_LEN);
	prefix[SBX_KEY_SHOWN_PREFIX_LEN] = 0;
	sbx_id_new(id);
	if (sbx_db_query(&db, NULL, &err,
			 "INSERT INTO api_keys (id, org_id, name, prefix, hash, is_admin, rotated_from) "
			 "VALUES ($1, $2, $3, $4, $5::bytea, $6::boolean, $7)",
			 7, id, org_id, name, prefix, hash_hex, admin ? "true" : "false", rotated_from) < 0)
		die_err(&err);
	fprintf(stderr, "issued key %s (%s...) for organisation %s; the token is shown only now\n", id,
		prefix, org_id);
	printf("%s\n", token);
	sodium_memzero(token, sizeof(token));
	return 0;
}

static int cmd_key(int argc, char **argv)
{
	sbx_err err = SBX_ERR_INIT;

	if (argc < 3)
		return bad_usage();
	need_db();
	if (!strcmp(argv[1], "issue")) {
		char org[SBX_ID_LEN + 1];
		const char *name = "";
		int admin = 0;
		for (int i = 3; i < argc; i++) {
			if (!strcmp(argv[i], "--name") && i + 1 < argc)
				name = argv[++i];
			else if (!strcmp(argv[i], "--admin"))
				admin = 1;
			else
				return bad_usage();
		}
		need_auth();
		org_id_of(argv[2], org);
		return issue_key(org, name, admin, NULL);
	}
	if (!strcmp(argv[1], "list") && argc == 3) {
		cleanup_pgres PGresult *r = NULL;
		char org[SBX_ID_LEN + 1];
		org_id_of(argv[2], org);
		if (sbx_db_query(&db, &r, &err,
				 "SELECT id, prefix, name, is_admin, created_at, "
				 "coalesce(last_used_at::text, '-'), coalesce(revoked_at::text, '-') "
				 "FROM api_keys WHERE org_id = $1 ORDER BY created_at",
				 1, org) < 0)
			die_err(&err);
		printf("%-24s  %-12s  %-16s  %-5s  %-32s  %s\n", "ID", "PREFIX", "NAME", "ADMIN", "CREATED",
		       "REVOKED");
		for (int i = 0; i < PQntuples(r); i++)
			printf("%-24s  %-12s  %-16s  %-5s  %-32s  %s\n", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
			       PQgetvalue(r, i, 2), PQgetvalue(r, i, 3)[0] == 't' ? "yes" : "no",
			       PQgetvalue(r, i, 4), PQgetvalue(r, i, 6));
		return 0;
	}
	if ((!strcmp(argv[1], "revoke") || !strcmp(argv[1], "rotate")) && argc == 3) {
		cleanup_pgres PGresult *r = NULL;
		int rotate = argv[1][1] == 'o';

		if (!sbx_id_valid(argv[2])) {
			fprintf(stderr, "sbx-admin: '%s' is not a key id\n", argv[2]);
			return 2;
		}
		if (rotate)
			need_auth();
		if (sbx_db_begin(&db, &err) < 0)
			die_err(&err);
		if (sbx_db_query(&db, &r, &err,
				 "UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL "
				 "RETURNING org_id, name, is_admin",
				 1, argv[2]) < 0)
			die_err(&err);
		if (PQntuples(r) != 1) {
			sbx_db_rollback(&db);
			fprintf(stderr, "sbx-admin: no active key %s\n", argv[2]);
			return 1;
		}
		if (rotate)
			issue_key(PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2)[0] == 't', argv[2]);
		if (sbx_db_commit(&db, &err) < 0)
			die_err(&err);
		if (!rotate)
			fprintf(stderr, "revoked key %s\n", argv[2]);
		return 0;
	}
	return bad_usage();
}

/* usage ORG [--from T] [--to T]: what GET /usage answers that organisation. */
static int cmd_usage(int argc, char **argv)
{
	sbx_err err = SBX_ERR_INIT;
	char org[SBX_ID_LEN + 1];
	const char *from = NULL, *to = NULL;
	json_t *u;
	char *s;

	if (argc < 2 || argc % 2 != 0)
		return bad_usage();
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--from"))
			from = argv[i + 1];
		else if (!strcmp(argv[i], "--to"))
			to = argv[i + 1];
		else
			return bad_usage();
	}
	need_db();
	org_id_of(argv[1], org);
	if (sbx_usage(&db, cfg, org, from, to, &u, &err) < 0)
		die_err(&err);
	s = json_dumps(u, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (s)
		puts(s);
	free(s);
	json_decref(u);
	return 0;
}

int main(int argc, char **argv)
{
	const char *conf = getenv("SBX_CONF");
	sbx_err err = SBX_ERR_INIT;
	int c, rc;

	static const struct option opts[] = { { "config", required_argument, NULL, 'c' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	while ((c = getopt_long(argc, argv, "+c:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': conf = optarg; break;
		case 'h': usage(stdout); return 0;
		default: return bad_usage();
		}
	}
	if (!conf)
		conf = SBX_SYSCONFDIR "/sbx/sbx.conf";
	if (optind >= argc)
		return bad_usage();
	if (sodium_init() < 0) {
		fprintf(stderr, "sbx-admin: libsodium failed to initialise\n");
		return 1;
	}
	if (sbx_config_load(conf, &cfg, &err) < 0)
		die_err(&err);
	sbx_log_init("sbx-admin", "", "warn");
	argc -= optind;
	argv += optind;
	if (!strcmp(argv[0], "migrate"))
		rc = cmd_migrate(argc, argv);
	else if (!strcmp(argv[0], "org"))
		rc = cmd_org(argc, argv);
	else if (!strcmp(argv[0], "key"))
		rc = cmd_key(argc, argv);
	else if (!strcmp(argv[0], "usage"))
		rc = cmd_usage(argc, argv);
	else
		rc = bad_usage();
	sbx_db_close(&db);
	sbx_config_free(cfg);
	return rc;
}
