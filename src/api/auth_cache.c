/* What a key resolves to, kept per API process for a few seconds.
 *
 * Every request but the public ones starts by resolving its key; that was
 * a query per request, most of the cost of a short GET. So each child
 * keeps the answers it looked up (the key's hash, its organisation, admin
 * flag and the organisation's limits) for api_auth_cache_seconds.
 *
 * Revocation must not wait for that: sql/013_auth_notify.sql announces
 * every change of api_keys (but last_used_at) and orgs on channel
 * sbx_auth, each child LISTENs on its own connection, and before it answers
 * from the cache it reads what its connection received without waiting
 * (one non-blocking read): any sbx_auth notification empties the cache.
 * Postgres delivers a notification to an idle session as soon as the
 * change commits, so a revoked key stops working within the time the
 * notification takes to arrive, not within the TTL. The TTL only bounds
 * the damage of a notification that could be missed: when the connection
 * was replaced (notifications in between are lost), the cache is emptied
 * and the child LISTENs again; while it cannot LISTEN, it does not cache.
 *
 * Only answers that a key is valid are kept: an unknown key is looked up
 * every time (nothing to gain by making a guesser's answer faster). The
 * hash is the keyed BLAKE2b of the token, compared in constant time. */
#include "config.h"
#include <string.h>
#include "api.h"
#include "clock.h"
#include "log.h"

#define CACHE_SLOTS 64

static struct entry {
	unsigned char hash[SBX_KEY_HASH_LEN];
	struct api_org org;
	long long expires_ms;
	bool used;
} cache[CACHE_SLOTS];

static bool listening;
static unsigned listen_session; /* the session (sbx_db.sessions) the LISTEN was made on */

static void flush(void)
{
	memset(cache, 0, sizeof(cache));
}

static void on_notify(void *arg, const char *channel, const char *payload)
{
	(void)arg;
	(void)payload;
	if (strcmp(channel, "sbx_auth") == 0)
		flush();
}

/* Whether the cache may be used now: the connection listens and nothing
 * it received says otherwise. */
static bool usable(struct api_ctx *ctx)
{
	sbx_db *db = &ctx->db;
	sbx_err err = SBX_ERR_INIT;

	if (sbx_cfg_int(ctx->cfg, "api_auth_cache_seconds") <= 0)
		return false;
	if (sbx_db_ensure(db, &err) < 0)
		return false;
	db->on_notify = on_notify;
	if (!listening || listen_session != db->sessions) {
		/* what was announced while we were not listening is lost */
		flush();
		listen_session = db->sessions;
		listening = sbx_db_listen(db, "sbx_auth", &err) == 0;
		if (!listening)
			log_warnx("cannot LISTEN sbx_auth (%s): keys are looked up on every request", err.msg);
		return false; /* the cache is empty anyway */
	}
	return sbx_db_poll_notifies(db) == 0;
}

bool api_auth_cache_get(struct api_ctx *ctx, const unsigned char hash[SBX_KEY_HASH_LEN], struct api_org *org)
{
	long long now;

	if (!usable(ctx))
		return false;
	now = sbx_now_ms();
	for (int i = 0; i < CACHE_SLOTS; i++) {
		struct entry *e = &cache[i];
		if (!e->used || !sbx_auth_hash_equal(e->hash, hash))
			continue;
		if (e->expires_ms <= now) {
			e->used = false;
			return false;
		}
		*org = e->org;
		return true;
	}
	return false;
}

void api_auth_cache_put(struct api_ctx *ctx, const unsigned char hash[SBX_KEY_HASH_LEN], const struct api_org *org)
{
	long long ttl = sbx_cfg_int(ctx->cfg, "api_auth_cache_seconds") * 1000, now = sbx_now_ms();
	struct entry *victim = NULL;

	if (ttl <= 0 || !listening || ctx->db.sessions != listen_session)
		return;
	for (int i = 0; i < CACHE_SLOTS; i++) {
		struct entry *e = &cache[i];
		if (!e->used || e->expires_ms <= now || sbx_auth_hash_equal(e->hash, hash)) {
			victim = e;
			break;
		}
		if (!victim || e->expires_ms < victim->expires_ms)
			victim = e;
	}
	memcpy(victim->hash, hash, SBX_KEY_HASH_LEN);
	victim->org = *org;
	victim->expires_ms = now + ttl;
	victim->used = true;
}
