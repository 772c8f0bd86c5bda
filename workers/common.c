/* Small things every role uses. */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "daemon.h"
#include "roles.h"

const char *worker_node_id(const sbx_config *cfg)
{
	static char id[256];
	const char *s = sbx_cfg_str(cfg, "node_id");

	if (s && *s) {
		snprintf(id, sizeof(id), "%s", s);
		return id;
	}
	if (gethostname(id, sizeof(id) - 1) < 0 || !id[0])
		snprintf(id, sizeof(id), "localhost");
	id[sizeof(id) - 1] = 0;
	return id;
}

void worker_sleep_ms(long ms)
{
	while (ms > 0 && !sbx_child_stop) {
		long step = ms < 100 ? ms : 100;
		struct timespec ts = { 0, step * 1000000L };
		/* EINTR is fine: the loop re-checks sbx_child_stop */
		nanosleep(&ts, NULL);
		ms -= step;
	}
}

long worker_retry_next(long ms)
{
	return ms * 2 > WORKER_RETRY_MAX_MS ? WORKER_RETRY_MAX_MS : ms * 2;
}
