-- Every finished exec, for usage and audit: written by the node agent when
-- the command ends (exit, or an error after it started). A background
-- command is recorded when it was started (exit_code NULL, background).
CREATE TABLE execs (
	id              char(24) PRIMARY KEY,
	sandbox_id      char(24) NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,
	org_id          char(24) NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
	cmd             text NOT NULL,          -- argv joined by spaces, at most 4 KiB
	exit_code       integer,                -- NULL: it ended with an error, or runs on
	signal          integer,
	timed_out       boolean NOT NULL DEFAULT false,
	duration_ms     bigint NOT NULL,
	stdout_bytes    bigint NOT NULL DEFAULT 0,
	stderr_bytes    bigint NOT NULL DEFAULT 0,
	background      boolean NOT NULL DEFAULT false,
	error           text,                   -- the error code when it ended with one
	started_at      timestamptz NOT NULL,
	recorded_at     timestamptz NOT NULL DEFAULT now(),
	request_id      text
);
CREATE INDEX execs_org_started ON execs(org_id, started_at DESC);
CREATE INDEX execs_sandbox_started ON execs(sandbox_id, started_at DESC);
