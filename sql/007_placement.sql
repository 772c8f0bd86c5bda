-- A sandbox record points at its placement: the node's objects of a sandbox
-- (state directory, runsc container, netns, veth, nft chains, cgroups, disk
-- image) are named by placement_id, no longer by the sandbox id, so a
-- sandbox started before any create (the warm pool) can be handed to one.
-- A random 24-hex id of its own; sandboxes made before this keep their id.
-- Unique: no two records ever point at the same placement.
ALTER TABLE sandboxes ADD COLUMN placement_id char(24);
UPDATE sandboxes SET placement_id = id;
ALTER TABLE sandboxes
	ALTER COLUMN placement_id SET DEFAULT substr(md5(gen_random_uuid()::text), 1, 24),
	ALTER COLUMN placement_id SET NOT NULL,
	ADD CONSTRAINT sandboxes_placement_hex CHECK (placement_id ~ '^[0-9a-f]{24}$');
CREATE UNIQUE INDEX sandboxes_placement ON sandboxes(placement_id);

-- The warm pool (issue 10): sandboxes a node started before any create,
-- for a template and the default specs, handed to one create each (never
-- reused). A node lists its members here (rows go when one is handed out
-- or destroyed; a node agent's start removes its node's rows), so an
-- operator and the leftover checks see them; no organisation owns them.
CREATE TABLE warm_pool (
	placement_id    char(24) PRIMARY KEY CHECK (placement_id ~ '^[0-9a-f]{24}$'),
	node_id         text NOT NULL,
	template        text NOT NULL,
	cpu             integer NOT NULL,
	memory_mb       integer NOT NULL,
	disk_gb         integer NOT NULL,
	created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX warm_pool_node ON warm_pool(node_id);
