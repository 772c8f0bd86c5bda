# rules for workers
