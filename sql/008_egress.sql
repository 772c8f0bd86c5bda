-- Egress (issue 11): the addresses the node resolved for each hostname of a
-- restricted sandbox's allow list, as the node keeps them current
-- ({"host": ["A.B.C.D", ...]}). Shown by GET /sandboxes/{id} as
-- egress.resolved (the API adds it; the sandbox view is unchanged).
ALTER TABLE sandboxes ADD COLUMN IF NOT EXISTS egress_resolved jsonb NOT NULL DEFAULT '{}';
