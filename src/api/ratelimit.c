/* Requests per second per API key (issue 15): a token bucket per key.
 *
 * The buckets live in one anonymous shared mapping that the master makes
 * before it forks, like the request metrics (metrics.c): every child of
 * this sbx-api sees the same buckets, and a replaced child keeps them.
 * Postgres would make the limit global over several API machines, but at
 * the price of a write (and its WAL) on every request, more than the whole
 * of a cached GET costs; the limit is a guard against one key flooding the
 * API, and an install that runs N API machines behind one balancer gives a
 * key at most N times its rate. The figures are in doc/operations.md.
 *
 * The table is small and fixed: a key hashes to a run of PROBE slots; when
 * none is its own or free, it takes the one idle longest. A bucket thrown
 * out that way was idle, so it was (nearly) full: starting it again full
 * gives its key nothing it would not have had.
 *
 * One process-shared mutex guards the table; the critical section is a few
 * arithmetic operations. It is robust: a child killed while holding it
 * leaves it to the next one (EOWNERDEAD), which takes the table as it is
 * (at worst one bucket's update half made, which only costs accuracy). */
#include "config.h"
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "api.h"
#include "hash.h"
#include "log.h"

#define NSLOTS 4096
#define PROBE 8

struct bucket {
	char key[SBX_ID_LEN + 1]; /* "" : free */
	double tokens;
	long long last_us;
};

struct table {
	pthread_mutex_t lock;
	struct bucket b[NSLOTS];
};

static struct table *T;

int api_rate_init(sbx_err *err)
{
	pthread_mutexattr_t a;
	void *p = mmap(NULL, sizeof(*T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return sbx_err_sys(err, "internal", "rate limits: mmap of %zu bytes", sizeof(*T));
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	if (pthread_mutex_init(&((struct table *)p)->lock, &a) != 0) {
		pthread_mutexattr_destroy(&a);
		munmap(p, sizeof(*T));
		return sbx_err_set(err, 500, "internal", "rate limits: cannot make the shared lock");
	}
	pthread_mutexattr_destroy(&a);
	T = p;
	return 0;
}

static long long mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static struct bucket *find(const char *key, long long now)
{
	unsigned h = sbx_hash_str(key);
	struct bucket *oldest = NULL;

	for (int i = 0; i < PROBE; i++) {
		struct bucket *b = &T->b[(h + (unsigned)i) % NSLOTS];
		if (!strcmp(b->key, key))
			return b;
		if (!b->key[0] || !oldest || b->last_us < oldest->last_us)
			oldest = b;
		if (!b->key[0])
			break;
	}
	snprintf(oldest->key, sizeof(oldest->key), "%s", key);
	oldest->tokens = -1; /* new: filled below */
	oldest->last_us = now;
	return oldest;
}

/* The key's rate and burst: the organisation's own, else the settings. */
static void limits_of(const struct api_req *r, long long *rate, long long *burst)
{
	*rate = r->org.key_rate >= 0 ? r->org.key_rate : sbx_cfg_int(r->ctx->cfg, "api_key_rate_per_s");
	*burst = r->org.key_burst >= 0 ? r->org.key_burst : sbx_cfg_int(r->ctx->cfg, "api_key_burst");
	if (*burst < *rate)
		*burst = *rate; /* a second's worth at least */
}

int api_rate_check(struct api_req *r, sbx_err *err)
{
	long long rate, burst, now;
	struct bucket *b;
	double wait = 0;
	int rc;

	limits_of(r, &rate, &burst);
	if (rate <= 0 || !T || !r->org.key_id[0])
		return 0;
	rc = pthread_mutex_lock(&T->lock);
	if (rc == EOWNERDEAD)
		pthread_mutex_consistent(&T->lock);
	else if (rc != 0) {
		log_warnx("rate limits: cannot take the shared lock (%s); request let through", strerror(rc));
		return 0;
	}
	now = mono_us();
	b = find(r->org.key_id, now);
	if (b->tokens < 0)
		b->tokens = (double)burst;
	else
		b->tokens += (double)(now - b->last_us) * (double)rate / 1e6;
	if (b->tokens > (double)burst)
		b->tokens = (double)burst;
	b->last_us = now;
	if (b->tokens >= 1)
		b->tokens -= 1;
	else
		wait = (1 - b->tokens) / (double)rate;
	pthread_mutex_unlock(&T->lock);
	if (wait <= 0)
		return 0;
	/* whole seconds (Retry-After has no fractions), rounded up */
	r->retry_after = (int)wait;
	if ((double)r->retry_after < wait || r->retry_after < 1)
		r->retry_after++;
	return sbx_err_set(err, 429, "key_rate_limit",
			   "Too many requests for this API key (at most %lld per second, bursts of %lld); retry "
			   "after %d s",
			   rate, burst, r->retry_after);
}
