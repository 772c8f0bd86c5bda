/* The reaper: destroys idle, expired and long-paused sandboxes. For now a
 * placeholder process supervised like the real one will be. */
#include "config.h"
#include <unistd.h>
#include "daemon.h"
#include "log.h"
#include "roles.h"

int reaper_run(const sbx_config *cfg, int index, void *ctx)
{
	(void)ctx;
	log_info("reaper #%d started (every %lld s)", index, sbx_cfg_int(cfg, "reaper_interval"));
	while (!sbx_child_stop)
		sleep(1); /* a signal ends the sleep early */
	log_info("reaper #%d stopped", index);
	return 0;
}
