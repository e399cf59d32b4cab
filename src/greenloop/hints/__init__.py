"""Hints: what a failure shows and where to look, from the rule table, the two values and the
workspace's source."""
