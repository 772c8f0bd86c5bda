/* Turns: how many children of one sbx-api serve short requests at once.
 *
 * The pool is sized for streams: 64 concurrent exec streams need 64
 * children (each holds one for its whole duration), so the private stack
 * runs 80. But when 64 short requests arrive together, 64 children and
 * their 64 Postgres backends all run at once on a 2-CPU machine, and
 * `GET /sandboxes/{id}` made 60 % of what 8 children made (bench/api-get:
 * switching between 130 runnable processes, cold caches, every child
 * asleep when its request comes). So a child takes a turn before it
 * accepts a request, and at most api_short_requests (4 per CPU by default)
 * hold one: the others sleep, the queue waits in the listen socket, and
 * the few children that run keep their Postgres sessions hot.
 *
 * A turn is only for work that ends on its own (our code, Postgres). A
 * request gives its turn back as soon as it would wait for someone else:
 * a long-running route (exec, follow, wait, transfers), a request body it
 * has to wait for (api_turn_leave from the body reader), a worker over
 * RabbitMQ (api_mq). So slow clients and streams never hold turns, and a
 * turn is never held while waiting for a turn.
 *
 * The turns are a SysV semaphore made by the master before it forks:
 * SEM_UNDO gives a killed child's turn back, which no counter in shared
 * memory would. The FastCGI socket is nginx's alone (mode 0660, group
 * www-data): nginx sends a request's parameters as soon as it connects,
 * so accepting one never waits long. */
#include "config.h"
#include <errno.h>
#include <sys/sem.h>
#include "api.h"
#include "log.h"

static int sem = -1;
static bool holding;

int api_turns_new(int n, sbx_err *err)
{
	sem = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
	if (sem < 0)
		return sbx_err_sys(err, "semget", "semget");
	if (semctl(sem, 0, SETVAL, n) < 0) {
		sbx_err_sys(err, "semctl", "semctl SETVAL");
		semctl(sem, 0, IPC_RMID);
		sem = -1;
		return -1;
	}
	return 0;
}

void api_turns_free(void)
{
	if (sem >= 0)
		semctl(sem, 0, IPC_RMID);
	sem = -1;
}

int api_turn_take(void)
{
	struct sembuf op = { 0, -1, SEM_UNDO };

	if (sem < 0 || holding)
		return 0;
	if (semop(sem, &op, 1) < 0) {
		if (errno == EINTR)
			return -1; /* a signal: the caller looks at its stop flag */
		log_warn("turns: semop; serving without turns");
		sem = -1;
		return 0;
	}
	holding = true;
	return 0;
}

void api_turn_leave(void)
{
	struct sembuf op = { 0, 1, SEM_UNDO };

	if (!holding)
		return;
	holding = false;
	if (sem >= 0 && semop(sem, &op, 1) < 0)
		log_warn("turns: semop");
}
