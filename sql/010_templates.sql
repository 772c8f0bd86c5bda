-- Templates answer to other names declared in their definitions (aliases),
-- and say what they were built from and which version they got. A node
-- writes these from the unpacked image (image.json) at each heartbeat.
ALTER TABLE templates ADD COLUMN aliases text[] NOT NULL DEFAULT '{}';
ALTER TABLE templates ADD COLUMN parent text NOT NULL DEFAULT '';
ALTER TABLE templates ADD COLUMN version text NOT NULL DEFAULT '';
