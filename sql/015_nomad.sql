-- The Nomad driver (workers/driver_nomad.c, doc/nomad.md): a sandbox placed
-- on a Nomad cluster keeps the id of its job (written before the job is
-- registered, so the reaper can always find it) and of its allocation
-- (written once it is running; the reaper fails the record when Nomad no
-- longer has it). Both stay NULL for sandboxes of the local driver.
ALTER TABLE sandboxes ADD COLUMN IF NOT EXISTS nomad_job_id text;
ALTER TABLE sandboxes ADD COLUMN IF NOT EXISTS nomad_alloc_id text;
CREATE INDEX IF NOT EXISTS sandboxes_nomad_job ON sandboxes(nomad_job_id) WHERE nomad_job_id IS NOT NULL;
