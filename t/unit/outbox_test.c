/* Proves, with no broker listening (127.0.0.1:1 refuses): putting never
 * waits for one (every put is queued while the thread cannot connect), the
 * queue is bounded in bytes (a put past max_bytes is refused with 503 and
 * counted lost, and one that fits afterwards is queued again), what was
 * put is counted in messages and bytes, and closing ends within its drain
 * with what is left counted lost. The publishing itself, against the real
 * broker and with a hold, is t/integration/node-publish.t's. */
#include "config.h"
#include <string.h>
#include "outbox.h"
#include "../tap.h"

int main(void)
{
	sbx_outbox *ob = NULL;
	sbx_err err = SBX_ERR_INIT;
	struct sbx_mq_pub p = { .type = "stdout", .correlation_id = "op1", .request_id = "" };
	char body[1000];
	long queued = -1, lost = -1;
	size_t bytes = 0;
	int puts = 0;

	plan(9);
	memset(body, 'x', sizeof(body));
	ok(sbx_outbox_open(&ob, "amqp://u:p@127.0.0.1:1/v", "boot", 64 * 1024, NULL, &err) == 0 && ob,
	   "opens with no broker listening (%s)", err.msg);
	for (int i = 0; i < 40; i++)
		puts += sbx_outbox_put(ob, "amq.rabbitmq.reply-to.x", body, sizeof(body), &p, &err) == 0;
	is_int(puts, 40, "40 puts of 1000 bytes are queued while no broker can be reached");
	sbx_outbox_stats(ob, &queued, &bytes, &lost);
	is_int(queued, 40, "40 messages wait");
	ok(bytes >= 40 * sizeof(body) && bytes < 64 * 1024, "their bytes are counted (%zu)", bytes);
	puts = 0;
	for (int i = 0; i < 40; i++)
		puts += sbx_outbox_put(ob, "q", body, sizeof(body), &p, &err) == 0;
	ok(puts > 0 && puts < 40, "past 64 KiB puts are refused (%d of 40 more fit)", puts);
	is_int(err.http, 503, "a refused put is a 503 (%s)", err.msg);
	sbx_outbox_stats(ob, &queued, &bytes, &lost);
	is_int(lost, 40 - puts, "each refused put is counted lost");
	ok(bytes <= 64 * 1024, "the queue stays within its bound (%zu bytes)", bytes);
	sbx_outbox_close(ob, 100);
	ok(1, "close ends with the broker still unreachable");
	return done_testing();
}
