"""The unit-test pipeline: probe a workspace, plan the command, run it, classify the result;
resume, merge shards, fold flaky reruns."""
