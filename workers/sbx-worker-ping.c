/* Test helper: sends one message to a worker queue over RabbitMQ's direct
 * reply-to and prints the answer. Used by t/integration/worker-master.t.
 *   sbx-worker-ping -c CONF [-r REQUEST_ID] [-t TIMEOUT_MS] [-T TYPE] [-b BODY] [-q QUEUE]
 * Prints "type=T" and the reply body on two lines; exits 0 on a reply,
 * 1 on an error or time-out (printed on stderr). */
#include "config.h"
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "log.h"
#include "mq.h"
#include "msg.h"
#include "settings.h"

int main(int argc, char **argv)
{
	const char *conf = NULL, *rid = NULL, *type = sbx_msg_name(SBX_MSG_PING), *body = "{}",
		   *queue = SBX_MSG_Q_PROVISION;
	int timeout_ms = 5000, c;
	sbx_config *cfg = NULL;
	sbx_err err = SBX_ERR_INIT;
	sbx_mq *mq = NULL;
	sbx_mq_msg reply;

	while ((c = getopt(argc, argv, "c:r:t:T:b:q:")) != -1) {
		switch (c) {
		case 'c': conf = optarg; break;
		case 'r': rid = optarg; break;
		case 't': timeout_ms = atoi(optarg); break;
		case 'T': type = optarg; break;
		case 'b': body = optarg; break;
		case 'q': queue = optarg; break;
		default:
			fprintf(stderr, "usage: sbx-worker-ping -c CONF [-r ID] [-t MS] [-T TYPE] [-b BODY] [-q QUEUE]\n");
			return 2;
		}
	}
	if (sodium_init() < 0)
		return 1;
	if (sbx_config_load(conf, &cfg, &err) < 0) {
		fprintf(stderr, "sbx-worker-ping: %s\n", err.msg);
		return 1;
	}
	sbx_log_init("sbx-worker-ping", "", "warn");
	if (rid)
		sbx_log_set_request_id(rid); /* sbx_mq_publish sends it as x-request-id */
	if (sbx_mq_open(&mq, sbx_cfg_str(cfg, "amqp_url"), &err) < 0 ||
	    sbx_mq_rpc(mq, queue, type, body, strlen(body), timeout_ms, &reply, &err) < 0) {
		fprintf(stderr, "sbx-worker-ping: %s\n", err.msg);
		sbx_mq_close(mq);
		sbx_config_free(cfg);
		return 1;
	}
	printf("type=%s\n%s\n", reply.type, reply.body);
	sbx_mq_msg_free(&reply);
	sbx_mq_close(mq);
	sbx_config_free(cfg);
	return 0;
}
