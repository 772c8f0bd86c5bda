-- A status change is announced only when someone waits for it.
--
-- Postgres 15 signals every session of the database that LISTENs on any
-- channel at each NOTIFY, whatever the channel. Every API child LISTENs on
-- sbx_auth (its key cache), so each status change of any sandbox (two a
-- create or destroy) woke api_children backends, which found nothing for
-- them: 80 signals and wake-ups on the committing path, CPU the create was
-- waiting for (bench/create-latency).
--
-- A waiter (GET /sandboxes/{id}/wait) holds a shared advisory lock on
-- (21315, hashtext(id)) while it waits (sbx_sandbox_wait_begin). The
-- trigger notifies when it cannot take that key exclusively. When it can,
-- it holds it until the change commits, so a waiter that comes after the
-- check gets its lock only then and reads the new status: no change a
-- waiter needs goes unannounced. Two ids of one hash announce each other's
-- changes, which only costs a look.
CREATE OR REPLACE FUNCTION sbx_sandbox_status_notify() RETURNS trigger
	LANGUAGE plpgsql AS
$$ BEGIN
	IF NOT pg_try_advisory_xact_lock(21315, hashtext(NEW.id)) THEN
		PERFORM pg_notify('sbx_sandbox_status', NEW.id);
	END IF;
	RETURN NULL;
END $$;
