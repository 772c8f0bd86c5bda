/* Proves: the channel handshake's MAC depends on the key, the role, the
 * nonce and the sandbox id (a MAC for one never passes for another); keys
 * parse only as 64 hex digits; the host's handshake succeeds against an end
 * that holds the sandbox's key and fails against one that holds another
 * sandbox's key, another id, another protocol version, or says something
 * other than the handshake first; step by step on a non-blocking socket
 * (the node agent's loop) it waits without blocking for an sbx-init slow
 * to speak, and leaves what follows the handshake unread. The far end is a child process speaking
 * sbx-init's side of the protocol over a socketpair. */
#include "config.h"
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sodium.h>
#include "chanauth.h"
#include "../tap.h"

#define ID_A "0123456789abcdef01234567"
#define ID_B "fedcba9876543210fedcba98"

static uint8_t key_a[SBX_CHAN_KEY_LEN], key_b[SBX_CHAN_KEY_LEN];

enum fake { GOOD, WRONG_KEY, WRONG_ID, OLD_VERSION, NO_HELLO, BAD_MAC_BACK, SLOW_THEN_MORE };

static void send_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t r = write(fd, p, n);
		if (r <= 0)
			_exit(3);
		p += r;
		n -= (size_t)r;
	}
}

/* sbx-init's side, as the real one does it (with faults on demand). */
static void fake_init(int fd, enum fake how)
{
	uint8_t out[SBX_FRAME_HDR + SBX_HELLO_LEN], nonce_i[SBX_CHAN_NONCE_LEN], in[256], nonce_n[16], mac[32];
	const uint8_t *key = how == WRONG_KEY ? key_b : key_a;
	const char *id = how == WRONG_ID ? ID_B : ID_A;
	struct sbx_frame f;
	size_t got = 0;
	long n;

	randombytes_buf(nonce_i, sizeof(nonce_i));
	if (how == NO_HELLO) {
		sbx_frame_header(out, SBX_F_PONG, 0, 1);
		out[SBX_FRAME_HDR] = 'x';
		send_all(fd, out, SBX_FRAME_HDR + 1);
		_exit(0);
	}
	sbx_frame_header(out, SBX_F_HELLO, 0, SBX_HELLO_LEN);
	sbx_hello_encode(nonce_i, out + SBX_FRAME_HDR);
	if (how == OLD_VERSION)
		sbx_put32(out + SBX_FRAME_HDR, 2);
	if (how == SLOW_THEN_MORE) {
		/* late, and in two pieces, the header split */
		usleep(200000);
		send_all(fd, out, 3);
		usleep(100000);
		send_all(fd, out + 3, sizeof(out) - 3);
	} else {
		send_all(fd, out, sizeof(out));
	}
	while ((n = sbx_frame_parse(in, got, 0, &f, NULL)) == 0) {
		ssize_t r = read(fd, in + got, sizeof(in) - got);
		if (r <= 0)
			_exit(0);
		got += (size_t)r;
	}
	if (n < 0 || sbx_auth_decode(&f, nonce_n, mac, NULL) < 0)
		_exit(4);
	if (!sbx_chan_mac_ok(key, "node", nonce_i, id, mac))
		_exit(5); /* the real sbx-init closes: so does this one */
	sbx_chan_mac(key, how == BAD_MAC_BACK ? "node" : "init", nonce_n, id, mac);
	sbx_frame_header(out, SBX_F_AUTH_OK, 0, SBX_CHAN_MAC_LEN);
	{
		/* AUTH_OK and, in the same write, the first frame after it */
		uint8_t both[2 * SBX_FRAME_HDR + SBX_CHAN_MAC_LEN + 1];
		memcpy(both, out, SBX_FRAME_HDR);
		memcpy(both + SBX_FRAME_HDR, mac, SBX_CHAN_MAC_LEN);
		sbx_frame_header(both + SBX_FRAME_HDR + SBX_CHAN_MAC_LEN, SBX_F_PONG, 7, 1);
		both[sizeof(both) - 1] = 'z';
		send_all(fd, both, how == SLOW_THEN_MORE ? sizeof(both) : SBX_FRAME_HDR + SBX_CHAN_MAC_LEN);
	}
	_exit(0);
}

/* Runs the host's handshake against a fake; returns its result and the
 * fake's exit status. */
/* A fake sbx-init in a child, at the other end of *fd. */
static pid_t spawn_fake(enum fake how, int *fd)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		bail_out("socketpair");
	pid = fork();
	if (pid < 0)
		bail_out("fork");
	if (pid == 0) {
		close(sv[0]);
		fake_init(sv[1], how);
	}
	close(sv[1]);
	*fd = sv[0];
	return pid;
}

static int try_handshake(enum fake how, int *child_status, sbx_err *err)
{
	int fd, rc;
	pid_t pid = spawn_fake(how, &fd);

	rc = sbx_chan_client_handshake(fd, key_a, ID_A, 2000, err);
	close(fd);
	waitpid(pid, child_status, 0);
	return rc;
}

/* The handshake one step at a time on a non-blocking socket, as the node
 * agent's loop runs it: *steps counts the calls, *first the first one's
 * result, *after the bytes left to read once it is done. */
static int step_handshake(int *steps, int *first, ssize_t *after, uint8_t *next_frame, sbx_err *err)
{
	struct sbx_chan_hs h;
	int fd, rc, st;
	pid_t pid = spawn_fake(SLOW_THEN_MORE, &fd);

	fcntl(fd, F_SETFL, O_NONBLOCK);
	sbx_chan_hs_init(&h, key_a, ID_A);
	*steps = 0;
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		rc = sbx_chan_hs_step(&h, fd, err);
		if (!(*steps)++)
			*first = rc;
		if (rc != 0 || *steps > 100)
			break;
		if (poll(&p, 1, 3000) <= 0)
			break;
	}
	sbx_chan_hs_clear(&h);
	usleep(50000);
	*after = read(fd, next_frame, 64);
	close(fd);
	waitpid(pid, &st, 0);
	return rc;
}

int main(void)
{
	uint8_t nonce[SBX_CHAN_NONCE_LEN] = { 1, 2, 3 }, nonce2[SBX_CHAN_NONCE_LEN] = { 1, 2, 4 };
	uint8_t mac[SBX_CHAN_MAC_LEN], k[SBX_CHAN_KEY_LEN];
	char hex[SBX_CHAN_KEY_HEX + 1];
	sbx_err err = SBX_ERR_INIT;
	int st;

	if (sodium_init() < 0)
		bail_out("sodium_init failed");
	signal(SIGPIPE, SIG_IGN);
	ok(sbx_chan_random(key_a, sizeof(key_a), &err) == 0 && sbx_chan_random(key_b, sizeof(key_b), &err) == 0,
	   "random keys");
	ok(memcmp(key_a, key_b, sizeof(key_a)) != 0, "two random keys differ");

	sbx_chan_mac(key_a, "node", nonce, ID_A, mac);
	ok(sbx_chan_mac_ok(key_a, "node", nonce, ID_A, mac), "a MAC checks with the same key, role, nonce, id");
	ok(!sbx_chan_mac_ok(key_b, "node", nonce, ID_A, mac), "... not with another sandbox's key");
	ok(!sbx_chan_mac_ok(key_a, "init", nonce, ID_A, mac), "... not for the other role");
	ok(!sbx_chan_mac_ok(key_a, "node", nonce2, ID_A, mac), "... not for another nonce (no replay)");
	ok(!sbx_chan_mac_ok(key_a, "node", nonce, ID_B, mac), "... not for another sandbox id");

	sbx_chan_key_hex(key_a, hex);
	is_int(strlen(hex), SBX_CHAN_KEY_HEX, "a key is %d hex characters", SBX_CHAN_KEY_HEX);
	ok(sbx_chan_key_parse(hex, k, &err) == 0 && !memcmp(k, key_a, sizeof(k)), "hex parses back to the key");
	hex[10] = 'g';
	ok(sbx_chan_key_parse(hex, k, &err) < 0, "a non-hex character is refused");
	ok(sbx_chan_key_parse("abcd", k, &err) < 0, "a short key is refused");
	ok(sbx_chan_key_parse(NULL, k, &err) < 0, "no key is refused");

	ok(try_handshake(GOOD, &st, &err) == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "the handshake succeeds with the sandbox that holds its key");
	ok(try_handshake(WRONG_KEY, &st, &err) < 0 && WEXITSTATUS(st) == 5,
	   "another sandbox's sbx-init refuses our AUTH, and we fail (%s)", err.msg);
	ok(try_handshake(WRONG_ID, &st, &err) < 0, "an sbx-init of another sandbox id fails the handshake");
	ok(try_handshake(OLD_VERSION, &st, &err) < 0 && strstr(err.msg, "version"),
	   "an older protocol version is refused (%s)", err.msg);
	ok(try_handshake(NO_HELLO, &st, &err) < 0, "a first frame other than HELLO is refused (%s)", err.msg);
	ok(try_handshake(BAD_MAC_BACK, &st, &err) < 0 && strstr(err.msg, "prove"),
	   "an AUTH_OK whose MAC is not sbx-init's is refused (%s)", err.msg);
	sbx_err_clear(&err);
	{
		int steps = 0, first = -2;
		ssize_t after;
		uint8_t nf[64] = { 0 };
		ok(step_handshake(&steps, &first, &after, nf, &err) == 1, "step by step, the handshake succeeds (%s)",
		   err.msg);
		is_int(first, 0, "...its first step, before sbx-init spoke, returns at once: not yet");
		ok(steps >= 4, "...it took several steps, one read each (%d)", steps);
		ok(after == SBX_FRAME_HDR + 1 && nf[4] == SBX_F_PONG && nf[SBX_FRAME_HDR] == 'z',
		   "...and the frame sbx-init sent right after AUTH_OK is left to read (%zd bytes)", after);
	}
	sbx_err_clear(&err);
	return done_testing();
}
