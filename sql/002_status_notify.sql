-- Every status change is announced on channel sbx_sandbox_status with the
-- sandbox id, so GET /sandboxes/{id}/wait sleeps in LISTEN instead of polling.
CREATE FUNCTION sbx_sandbox_status_notify() RETURNS trigger
	LANGUAGE plpgsql AS
$$ BEGIN
	PERFORM pg_notify('sbx_sandbox_status', NEW.id);
	RETURN NULL;
END $$;

CREATE TRIGGER sandboxes_status_notify
	AFTER UPDATE OF status ON sandboxes
	FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
	EXECUTE FUNCTION sbx_sandbox_status_notify();

-- A destroy is written down before it is attempted: the reaper finishes
-- what a crash interrupted.
ALTER TABLE sandboxes ADD COLUMN destroy_requested_at timestamptz;
CREATE INDEX sandboxes_destroy_pending ON sandboxes(destroy_requested_at)
	WHERE destroy_requested_at IS NOT NULL AND status <> 'destroyed';
