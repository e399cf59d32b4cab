"""The closure loop's state: the store, pure transitions, the gate's decision, which session a
call belongs to, background jobs."""
