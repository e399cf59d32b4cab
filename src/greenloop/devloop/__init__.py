"""The DevLoop's records: the timeline and the unit registry's status."""
