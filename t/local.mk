# rules for t
