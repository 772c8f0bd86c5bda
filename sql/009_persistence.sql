-- Persistence (issue 12): volumes, and the sandbox's side of them.
--
-- A volume is a sparse ext4 image on one node (node_id), attached to at
-- most one live sandbox at a time. The attachment is the record's
-- (attached_sandbox_id, unique while set); it is taken in the same
-- transaction as the sandbox's insert and given back by the trigger below
-- when the sandbox ends (failed or destroyed), so no path through the code
-- can forget it. The node refuses to mount an image that is still on a loop
-- device, which covers the moment between a record ending and its node
-- having unmounted the sandbox.
CREATE TABLE volumes (
	id              char(24) PRIMARY KEY,
	org_id          char(24) NOT NULL REFERENCES orgs(id),
	name            text NOT NULL CHECK (name ~ '^[a-z0-9-]{1,40}$'),
	type            text NOT NULL DEFAULT 'web' CHECK (type IN ('web', 'sandbox')),
	size_gb         integer NOT NULL CHECK (size_gb >= 1),
	region          text NOT NULL,
	node_id         text NOT NULL,
	mount_path      text,
	attached_sandbox_id char(24),
	last_attached_at timestamptz,
	created_at      timestamptz NOT NULL DEFAULT now(),
	updated_at      timestamptz NOT NULL DEFAULT now(),
	-- a delete is written down first; the node removes the image, then the row goes
	deleted_at      timestamptz
);
CREATE UNIQUE INDEX volumes_org_name ON volumes(org_id, name) WHERE deleted_at IS NULL;
CREATE UNIQUE INDEX volumes_attached ON volumes(attached_sandbox_id) WHERE attached_sandbox_id IS NOT NULL;
CREATE INDEX volumes_org_created ON volumes(org_id, created_at DESC);

CREATE FUNCTION sbx_volume_detach() RETURNS trigger
	LANGUAGE plpgsql AS
$$ BEGIN
	UPDATE volumes SET attached_sandbox_id = NULL, updated_at = now() WHERE attached_sandbox_id = NEW.id;
	RETURN NULL;
END $$;

CREATE TRIGGER sandboxes_volume_detach
	AFTER UPDATE OF status ON sandboxes
	FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status IN ('failed', 'destroyed'))
	EXECUTE FUNCTION sbx_volume_detach();

-- The public Volume object (API.md "Volumes"); the region object is added by
-- the API (it is the install's region). csi_volume_id is the same handle as
-- volume_handle: the SDKs read that name.
CREATE FUNCTION sbx_volume_json(v volumes) RETURNS jsonb
	LANGUAGE sql STABLE AS
$$ SELECT jsonb_build_object(
	'id', v.id, 'name', v.name, 'type', v.type, 'size', v.size_gb, 'region', v.region,
	'team', v.org_id, 'mount_path', v.mount_path, 'attached_sandbox_id', v.attached_sandbox_id,
	'attached_project_id', NULL, 'last_attached_at', sbx_time(v.last_attached_at),
	'volume_handle', 'sbx-vol-' || v.id, 'csi_volume_id', 'sbx-vol-' || v.id,
	'created_at', sbx_time(v.created_at), 'updated_at', sbx_time(v.updated_at)) $$;

-- The sandbox a volume was made for (persistent: true): its node makes the
-- image when that sandbox starts; any other sandbox needs the image there.
ALTER TABLE volumes ADD COLUMN created_for char(24);

-- When the last pausing/resuming began: one that stays there longer than a
-- pause or resume can take was interrupted (a killed worker), and the node
-- agent settles it from what its disk says (workers/node_pause.c).
ALTER TABLE sandboxes ADD COLUMN transition_at timestamptz;
